package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/webhook"
)

func init() { extraCommands = append(extraCommands, newVerifyCmd) }

// verifyExit ends the process with a status other than main's 1; tests
// replace it.
var verifyExit = os.Exit

// maxVerifyBody caps the body read by herald verify.
const maxVerifyBody = 64 << 20

// verifyUsageError is a mistake in how a command was called: exit status 2.
type verifyUsageError struct{ msg string }

func (e verifyUsageError) Error() string { return e.msg }

func verifyUsagef(format string, a ...any) error { return verifyUsageError{fmt.Sprintf(format, a...)} }

func newVerifyCmd() *cobra.Command {
	var (
		secrets                         []string
		bodyFile, xSig                  string
		whID, whTimestamp, whSignatures string
		tolerance                       time.Duration
		at                              int64
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a webhook signature offline",
		Long: `Check the signature of a webhook body offline, with both schemes Herald sends:

  X-Signature         --x-signature 't=…,v1=…'
  Standard Webhooks   --webhook-id ID --webhook-timestamp T --webhook-signature 'v1,…'

The body is read as raw bytes from --body-file (- for stdin): verify exactly the
bytes that were received, never a re-serialised copy. The replay window is
checked against now, or against --at (unix seconds) for an old capture.

Exit status: 0 all given signatures valid, 1 one is invalid, 2 usage error.`,
		Example: `  herald verify --secret whsec_… --body-file body.json --x-signature "t=1750000000,v1=5f…"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := runVerify(cmd, secrets, bodyFile, xSig, [3]string{whID, whTimestamp, whSignatures}, tolerance, at)
			var ue verifyUsageError
			if errors.As(err, &ue) {
				fmt.Fprintf(cmd.ErrOrStderr(), "herald verify: %v\nRun 'herald verify --help' for usage.\n", err)
				verifyExit(2)
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "herald verify: %v\nRun 'herald verify --help' for usage.\n", err)
		verifyExit(2)
		return err
	})
	f := cmd.Flags()
	f.StringSliceVar(&secrets, "secret", nil, "whsec_… secret (repeatable, or comma-separated: a signature by any of them is valid)")
	f.StringVar(&bodyFile, "body-file", "", "file with the raw request body, - for stdin")
	f.StringVar(&xSig, "x-signature", "", "value of the X-Signature header: t=…,v1=…")
	f.StringVar(&whID, "webhook-id", "", "value of the webhook-id header")
	f.StringVar(&whTimestamp, "webhook-timestamp", "", "value of the webhook-timestamp header")
	f.StringVar(&whSignatures, "webhook-signature", "", "value of the webhook-signature header: v1,…")
	f.DurationVar(&tolerance, "tolerance", webhook.DefaultTolerance, "replay window: largest accepted distance between the signed timestamp and now")
	f.Int64Var(&at, "at", 0, "check the replay window at this time (unix seconds) instead of now")
	return cmd
}

func runVerify(cmd *cobra.Command, secrets []string, bodyFile, xSig string, std [3]string, tolerance time.Duration, at int64) error {
	if err := bindEnv(cmd); err != nil {
		return verifyUsageError{err.Error()}
	}
	if len(secrets) == 0 {
		return verifyUsagef("--secret is required")
	}
	for i, s := range secrets {
		if strings.TrimSpace(s) == "" {
			return verifyUsagef("--secret %d is empty", i+1)
		}
	}
	if bodyFile == "" {
		return verifyUsagef("--body-file is required (- reads stdin)")
	}
	stdGiven := std[0] != "" || std[1] != "" || std[2] != ""
	if xSig == "" && !stdGiven {
		return verifyUsagef("no signature given: use --x-signature, or --webhook-id, --webhook-timestamp and --webhook-signature")
	}
	if stdGiven && (std[0] == "" || std[1] == "" || std[2] == "") {
		return verifyUsagef("--webhook-id, --webhook-timestamp and --webhook-signature go together")
	}
	if tolerance <= 0 {
		return verifyUsagef("--tolerance %s: must be positive", tolerance)
	}
	if cmd.Flags().Changed("at") && at < 0 {
		return verifyUsagef("--at %d: must be unix seconds (≥ 0)", at)
	}

	var r io.Reader = cmd.InOrStdin()
	if bodyFile != "-" {
		fh, err := os.Open(bodyFile)
		if err != nil {
			return verifyUsagef("--body-file: %v", err)
		}
		defer fh.Close()
		r = fh
	}
	body, err := io.ReadAll(io.LimitReader(r, maxVerifyBody+1))
	if err != nil {
		return verifyUsagef("--body-file: %v", err)
	}
	if len(body) > maxVerifyBody {
		return verifyUsagef("--body-file: larger than %d bytes", maxVerifyBody)
	}

	v := &webhook.Verifier{Secrets: secrets, Tolerance: tolerance}
	if cmd.Flags().Changed("at") {
		v.Now = func() time.Time { return time.Unix(at, 0) }
	}
	out := cmd.OutOrStdout()
	invalid := 0
	report := func(name string, err error) {
		if err == nil {
			fmt.Fprintf(out, "%s: valid\n", name)
			return
		}
		invalid++
		fmt.Fprintf(out, "%s: INVALID: %s\n", name, strings.TrimPrefix(err.Error(), "webhook: "))
	}
	if xSig != "" {
		report("X-Signature", v.VerifyHerald(xSig, body))
	}
	if stdGiven {
		report("webhook-signature", v.VerifyStandard(std[0], std[1], std[2], body))
	}
	if invalid > 0 {
		return fmt.Errorf("signature verification failed (%d invalid)", invalid)
	}
	return nil
}
