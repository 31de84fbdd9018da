package tracing

import (
	"context"
	"fmt"
	"io"
	"os"
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
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName("herald"), semconv.ServiceVersion(version)),
		resource.Environment(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(sp), sdktrace.WithResource(res)), nil
}
