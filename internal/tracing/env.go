package tracing

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Provider is the tracer provider FromEnv built; Shutdown flushes the spans
// still batched and stops the exporter.
type Provider = sdktrace.TracerProvider

// Exporter names FromEnv accepts in OTEL_TRACES_EXPORTER.
const (
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
	ExporterNone    = "none"
)

// FromEnv builds the tracer provider the standard OpenTelemetry
// environment variables ask for
// (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/),
// or answers nil (tracing off) when they ask for none:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - OTEL_TRACES_EXPORTER=otlp, or unset while OTEL_EXPORTER_OTLP_ENDPOINT
//     or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set: OTLP over HTTP
//     (protobuf); the exporter reads its endpoint, headers, timeout,
//     compression and TLS files from the OTEL_EXPORTER_OTLP_* variables
//     itself. OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL may be unset or
//     http/protobuf: grpc and http/json are refused by name.
//   - OTEL_TRACES_EXPORTER=console: spans as JSON lines on console
//     (stdout when nil).
//   - Otherwise (no variable set): off.
//
// Sampling follows OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default
// parentbased_always_on), the resource OTEL_SERVICE_NAME (default
// "herald") and OTEL_RESOURCE_ATTRIBUTES. An unknown exporter or protocol
// is an error naming the variable.
func FromEnv(ctx context.Context, version string, console io.Writer) (*Provider, error) {
	getenv := os.Getenv // the SDK and the exporter read the same environment
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	if exp == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
		exp = ExporterOTLP
	}
	var sp sdktrace.SpanExporter
	switch exp {
	case ExporterNone:
		return nil, nil
	case ExporterOTLP:
		proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
		name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
		if proto == "" {
			proto, name = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")), "OTEL_EXPORTER_OTLP_PROTOCOL"
		}
		if proto != "" && proto != "http/protobuf" {
			return nil, fmt.Errorf("tracing: %s=%q: Herald exports OTLP over http/protobuf only (unset it or set http/protobuf; a collector accepts both on its ports 4318 and 4317)", name, proto)
		}
		if err := checkOTLPEnv(getenv); err != nil {
			return nil, err
		}
		e, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		sp = e
	case ExporterConsole:
		if console == nil {
			console = os.Stdout
		}
		e, err := stdouttrace.New(stdouttrace.WithWriter(console))
		if err != nil {
			return nil, fmt.Errorf("tracing: console exporter: %w", err)
		}
		sp = e
	default:
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: one of otlp, console or none (a list of several is not supported)", exp)
	}
	if err := checkSamplerEnv(getenv); err != nil {
		return nil, err
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName("herald"), semconv.ServiceVersion(version)),
		resource.Environment(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(sp), sdktrace.WithResource(res)), nil
}

// checkOTLPEnv refuses, naming the variable, the OTLP settings the
// exporter would otherwise accept and then fail on at every export (or
// ignore with a line outside Herald's log): endpoints that are not
// absolute http(s) URLs with a host, a timeout that is not a number of
// milliseconds, headers that are not key=value pairs, a compression other
// than gzip or none, an insecure flag other than true or false, and
// certificate or key files that cannot be read (or a CA file without a PEM
// certificate: the exporter would fall back to the system roots)
// (https://opentelemetry.io/docs/specs/otel/protocol/exporter/).
func checkOTLPEnv(getenv func(string) string) error {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("tracing: %s=%q: an absolute http:// or https:// URL with a host, e.g. http://127.0.0.1:4318", name, v)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			if ms, err := strconv.Atoi(v); err != nil || ms <= 0 {
				return fmt.Errorf("tracing: %s=%q: a positive number of milliseconds", name, v)
			}
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			if k, _, ok := strings.Cut(kv, "="); !ok || strings.TrimSpace(k) == "" {
				return fmt.Errorf("tracing: %s: %q is not key=value (the list is key1=value1,key2=value2)", name, kv)
			}
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"} {
		if v := strings.TrimSpace(getenv(name)); v != "" && v != "gzip" && v != "none" {
			return fmt.Errorf("tracing: %s=%q: gzip or none", name, v)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE"} {
		if v := strings.ToLower(strings.TrimSpace(getenv(name))); v != "" && v != "true" && v != "false" {
			return fmt.Errorf("tracing: %s=%q: true or false", name, getenv(name))
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
		"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		b, err := os.ReadFile(v)
		if err != nil {
			return fmt.Errorf("tracing: %s: %w", name, err)
		}
		ca := name == "OTEL_EXPORTER_OTLP_CERTIFICATE" || name == "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"
		if ca && !x509.NewCertPool().AppendCertsFromPEM(b) {
			return fmt.Errorf("tracing: %s=%q: no PEM certificate in the file", name, v)
		}
	}
	return nil
}

// checkSamplerEnv refuses an OTEL_TRACES_SAMPLER the SDK does not know and
// a ratio sampler's OTEL_TRACES_SAMPLER_ARG outside [0, 1] (the SDK would
// log a line and fall back to its default).
func checkSamplerEnv(getenv func(string) string) error {
	s := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	switch s {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return nil // the SDK's default ratio, 1.0
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG=%q: a ratio between 0 and 1 for %s", arg, s)
		}
		return nil
	default:
		return fmt.Errorf("tracing: OTEL_TRACES_SAMPLER=%q: one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", s)
	}
}
