package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/internal/listen"
)

func init() { extraCommands = append(extraCommands, newListenCmd) }

func newListenCmd() *cobra.Command {
	var (
		host, path, status, retryAfter string
		port                           int
		secrets                        []string
	)
	cmd := &cobra.Command{
		Use:   "listen",
		Short: "Run a local receiver that verifies and prints deliveries",
		Long: `Run a local webhook receiver for demos and debugging. It verifies the
X-Signature and Standard Webhooks (webhook-*) signatures of every request with
the given secrets, prints each delivery, and answers with a scripted sequence of
statuses (the last one repeats) to watch retries and dead letters happen.

With --secret, a request whose signature does not verify (every scheme present
must; none present fails) is answered 401 {"error":"invalid signature"}, as the
webhook package's Middleware answers it, whatever --status says: the reason is
printed, and the request takes no step of the --status script. Without
--secret, signatures are not checked and every request is answered from the
script.

Point an endpoint at it with "herald serve --dev", e.g.
  herald listen --port 9000 --secret whsec_… --status 503,503,200

Every flag has an environment twin: --retry-after is HERALD_RETRY_AFTER.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			if cmd.Flags().Changed("secret") && len(secrets) == 0 {
				return fmt.Errorf("--secret is empty")
			}
			statuses, err := parseStatusScript(status)
			if err != nil {
				return err
			}
			if port < 0 || port > 65535 {
				return fmt.Errorf("--port %d: must be 0–65535 (0 picks a free port)", port)
			}
			if !strings.HasPrefix(path, "/") {
				return fmt.Errorf("--path %q: must start with /", path)
			}
			if retryAfter != "" {
				if n, err := strconv.Atoi(retryAfter); err != nil || n < 0 {
					if _, err := http.ParseTime(retryAfter); err != nil {
						return fmt.Errorf("--retry-after %q: use whole seconds (e.g. 2) or an HTTP date", retryAfter)
					}
				}
			}
			recv, err := listen.New(listen.Config{
				Secrets:    secrets,
				Statuses:   statuses,
				RetryAfter: retryAfter,
				Out:        cmd.OutOrStdout(),
			})
			if err != nil {
				return fmt.Errorf("--secret: %w", err) // statuses were checked above
			}
			return runListener(cmd.Context(), cmd, net.JoinHostPort(host, strconv.Itoa(port)), path, len(secrets), recv)
		},
	}
	f := cmd.Flags()
	f.IntVar(&port, "port", 0, "port to listen on (0 picks a free one, printed at start)")
	f.StringVar(&host, "host", "127.0.0.1", "address to listen on")
	f.StringSliceVar(&secrets, "secret", nil, "whsec_… secret to verify with (repeatable, or comma-separated, for a rotation overlap); a request that does not verify is answered 401")
	f.StringVar(&status, "status", "", "comma-separated statuses to answer verified requests in order, the last one repeating (default 200)")
	f.StringVar(&retryAfter, "retry-after", "", "Retry-After value sent with 429 and 503 answers (seconds)")
	f.StringVar(&path, "path", "/", "path that receives deliveries (/ receives every path)")
	return cmd
}

// parseStatusScript parses the --status script.
func parseStatusScript(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, fmt.Errorf("--status %q: %q is not a number (want e.g. 503,503,200)", s, part)
		}
		if n < 100 || n > 599 {
			return nil, fmt.Errorf("--status %q: %d is not an HTTP status (100–599)", s, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// runListener serves recv on addr under path until ctx ends, then shuts
// down gracefully.
func runListener(ctx context.Context, cmd *cobra.Command, addr, path string, nSecrets int, recv http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	h := recv
	if path != "/" {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != path {
				fmt.Fprintf(cmd.ErrOrStderr(), "ignored %s %s: not %s (404)\n", r.Method, r.URL.Path, path)
				http.NotFound(w, r)
				return
			}
			recv.ServeHTTP(w, r)
		})
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	note := ": a request that does not verify is answered 401"
	if nSecrets == 0 {
		note = ": signatures are not checked"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "listening on http://%s%s (verifying with %d secret(s)%s)\n", ln.Addr(), path, nSecrets, note)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
