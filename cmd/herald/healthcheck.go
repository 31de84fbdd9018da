package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/internal/redact"
)

func init() {
	extraCommands = append(extraCommands, newHealthcheckCmd)
}

// newHealthcheckCmd is the container image's HEALTHCHECK: the image has
// no shell and no curl, so the binary asks its own /readyz.
func newHealthcheckCmd() *cobra.Command {
	var target, server string
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the local Herald answers /readyz with 200 (the container image's HEALTHCHECK)",
		Long: `Exit 0 when the local Herald answers GET /readyz with 200 (its store is
reachable), 1 otherwise. The address is, first found: --url; --server or
HERALD_SERVER (the base URL the other commands use, + /readyz); or built from
HERALD_ADDR (its host, or 127.0.0.1 when it has none or is 0.0.0.0 or ::; its
port, or 8080) and https when HERALD_TLS_CERT is set.
The certificate is verified (system roots, or SSL_CERT_FILE) except on a
loopback address (127.0.0.1, ::1, localhost) or the node's own address from
HERALD_ADDR, where the node's certificate names its public host, not that one.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{envTwinsAnnotation: "server"}, // no bindEnv: HERALD_SERVER alone is read
		RunE: func(cmd *cobra.Command, _ []string) error {
			fromEnv := false
			if server == "" {
				server, fromEnv = os.Getenv("HERALD_SERVER"), true
			}
			own := false // the target is this node's own listener (from HERALD_ADDR)
			switch {
			case target != "":
			case server != "":
				base, err := parseServer(server)
				if err != nil {
					if fromEnv {
						return fmt.Errorf("HERALD_SERVER: %w", err)
					}
					return err
				}
				target = apiURL(base, "/readyz")
			default:
				host, port := "127.0.0.1", "8080"
				if a := os.Getenv("HERALD_ADDR"); a != "" {
					h, p, err := net.SplitHostPort(a)
					if err != nil || p == "" {
						return fmt.Errorf("HERALD_ADDR %q: want HOST:PORT or :PORT, as herald serve --addr takes (or give --url)", a)
					}
					port = p
					// A node listening on one address (127.0.0.2:8080,
					// 10.0.0.5:8080) is not reachable on 127.0.0.1.
					if ip, err := netip.ParseAddr(h); h != "" && !(err == nil && ip.IsUnspecified()) {
						host = h
					}
				}
				scheme := "http"
				if os.Getenv("HERALD_TLS_CERT") != "" {
					scheme = "https"
				}
				target = scheme + "://" + net.JoinHostPort(host, port) + "/readyz"
				own = true
			}
			u, err := url.Parse(target)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("--url %q: want a URL such as http://127.0.0.1:8080/readyz", redact.URL(target))
			}
			c := &http.Client{Timeout: 3 * time.Second}
			if own || loopbackHost(u.Hostname()) {
				c.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // #nosec: the node's own listener on loopback
			}
			resp, err := c.Get(target)
			if err != nil {
				return fmt.Errorf("healthcheck %s: %w", redact.URL(target), redact.URLError(err))
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("healthcheck %s: %s", redact.URL(target), resp.Status)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "url", "", "URL to check (default <--server>/readyz, else http://<HERALD_ADDR, 127.0.0.1:8080 by default>/readyz)")
	cmd.Flags().Var(newServerValue(&server, "", true), "server", "base URL of the Herald API, as for the other commands (default $HERALD_SERVER)")
	return cmd
}

// loopbackHost reports whether host (no port) names this machine's
// loopback interface.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
