// Package buildinfo describes the running binary: Herald's version, the
// commit and time it was built from, the Go version and the stores it
// supports. `herald version`, /healthz and the User-Agent of every attempt
// report the same values.
//
// Version, Commit and BuildTime may be set at link time:
//
//	go build -ldflags "-X github.com/herald-webhooks/herald/internal/buildinfo.Version=1.2.3" ./cmd/herald
//
// Commit and BuildTime otherwise come from the VCS stamp Go embeds
// (runtime/debug.ReadBuildInfo: vcs.revision, vcs.time) when the binary is
// built inside a git checkout.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Set at link time (-ldflags -X); see the package comment.
var (
	Version   = "0.1.0-dev"
	Commit    = ""
	BuildTime = ""
)

// Info is the description of the binary. JSON names are those of
// `herald version --json` and /healthz.
type Info struct {
	Version string `json:"version"`
	// Commit and BuildTime are "" when the binary was built without VCS
	// information (-buildvcs=false, a source tarball) and not given by
	// -ldflags; the JSON keys are always present, so /healthz and
	// `herald version --json` carry the same fields.
	Commit    string `json:"commit"`
	BuildTime string `json:"build_time"` // RFC 3339, UTC
	Modified  bool   `json:"modified"`   // built from a tree with uncommitted changes
	GoVersion string `json:"go_version"`
	// Stores are the --db drivers compiled in.
	Stores []string `json:"stores"`
}

var (
	once sync.Once
	info Info
)

// Get returns the binary's Info (computed once).
func Get() Info {
	once.Do(func() {
		info = Info{Version: Version, Commit: Commit, BuildTime: BuildTime, GoVersion: runtime.Version(), Stores: []string{"sqlite", "postgres"}}
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					if info.Commit == "" {
						info.Commit = s.Value
					}
				case "vcs.time":
					if info.BuildTime == "" {
						info.BuildTime = s.Value
					}
				case "vcs.modified":
					info.Modified = s.Value == "true"
				}
			}
		}
	})
	return info
}

// UserAgent is the User-Agent of Herald's requests: "Herald/<version>"
// followed by the short commit when known, e.g. "Herald/1.2.3 (3aee1f6)".
func UserAgent() string {
	i := Get()
	ua := "Herald/" + i.Version
	if len(i.Commit) >= 7 {
		ua += " (" + i.Commit[:7] + ")"
	}
	return ua
}
