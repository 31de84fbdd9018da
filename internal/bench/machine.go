package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where a figure was measured.
type Machine struct {
	Cores             int        `json:"cores"`
	GOMAXPROCS        int        `json:"gomaxprocs"`
	MemTotalBytes     int64      `json:"mem_total_bytes"`
	MemAvailableBytes int64      `json:"mem_available_bytes"`
	GoVersion         string     `json:"go_version"`
	OS                string     `json:"os"`
	Arch              string     `json:"arch"`
	CPUModel          string     `json:"cpu_model,omitempty"`
	LoadAvgStart      [3]float64 `json:"load_avg_start"`
	LoadAvgEnd        [3]float64 `json:"load_avg_end"`
}

func readMachine() Machine {
	m := Machine{
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mi := parseMeminfo(b)
		m.MemTotalBytes = mi["MemTotal"]
		m.MemAvailableBytes = mi["MemAvailable"]
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(b)
	}
	m.LoadAvgStart = loadAvg()
	return m
}

// parseMeminfo reads /proc/meminfo-style lines ("MemTotal:  24684312 kB")
// into bytes per key.
func parseMeminfo(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			n *= 1024
		}
		out[strings.TrimSpace(key)] = n
	}
	return out
}

func cpuModel(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAvg reads the 1, 5 and 15 minute load averages (zeros off Linux).
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

// procMem is the memory of a process from /proc/<pid>/status: VmRSS (now)
// and VmHWM (peak), in bytes; zeros when unavailable.
type procMem struct {
	RSS, Peak int64
}

func readProcMem(pid int) procMem {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procMem{}
	}
	mi := parseMeminfo(b)
	return procMem{RSS: mi["VmRSS"], Peak: mi["VmHWM"]}
}

// procCPU returns the user+system CPU time of a process in seconds, from
// /proc/<pid>/stat (0 when unavailable).
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// After ")": state is field 3, so utime (14) and stime (15) are at 11, 12.
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// clockTicks is USER_HZ, 100 on every Linux platform Go supports.
const clockTicks = 100

// treeCPU is the CPU time in seconds of process pid and its descendants
// (0 for pid 0).
func treeCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	total := procCPU(pid)
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(c); err == nil {
				total += treeCPU(n)
			}
		}
	}
	return total
}
