package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
)

func init() {
	extraCommands = append(extraCommands, newHealthcheckCmd)
}

// newHealthcheckCmd is the container image's HEALTHCHECK: the image has
// no shell and no curl, so the binary asks its own /readyz.
func newHealthcheckCmd() *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the local Herald answers /readyz with 200 (the container image's HEALTHCHECK)",
		Long: `Exit 0 when the local Herald answers GET /readyz with 200 (its store is
reachable), 1 otherwise. The address is --url, or built from HERALD_ADDR (port
only, on 127.0.0.1) and https when HERALD_TLS_CERT is set (the certificate is
not verified: the check is local).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target == "" {
				port := "8080"
				if a := os.Getenv("HERALD_ADDR"); a != "" {
					if _, p, err := net.SplitHostPort(a); err == nil && p != "" {
						port = p
					}
				}
				scheme := "http"
				if os.Getenv("HERALD_TLS_CERT") != "" {
					scheme = "https"
				}
				target = scheme + "://127.0.0.1:" + port + "/readyz"
			}
			c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec: a local liveness probe
			resp, err := c.Get(target)
			if err != nil {
				return fmt.Errorf("healthcheck %s: %w", target, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("healthcheck %s: %s", target, resp.Status)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "url", "", "URL to check (default http://127.0.0.1:<port of HERALD_ADDR>/readyz)")
	return cmd
}
