package bench

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// traceSink is a loopback OTLP/HTTP trace collector for --trace-sink: it
// decodes each export (so Herald's exporter does all its real work,
// protobuf encoding and HTTP included), counts the spans and drops them.
type traceSink struct {
	srv      *http.Server
	url      string
	requests atomic.Int64
	spans    atomic.Int64
}

func startTraceSink() (*traceSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &traceSink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *traceSink) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil || r.URL.Path != "/v1/traces" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-protobuf") {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	s.requests.Add(1)
	s.spans.Add(int64(n))
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (s *traceSink) close() { _ = s.srv.Close() }
