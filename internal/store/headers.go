package store

import "fmt"

// Endpoint custom headers are where receivers' credentials go
// (Authorization, API keys), so their values are sealed at rest like
// endpoint secrets.
//
// Sealed column: endpoints.headers keeps its JSON object shape
// {"<name>": "<value>"}; each value is stored as "enc:v1:" +
// base64(nonce ‖ ciphertext ‖ tag) (SealBytes) bound to the context
// HeaderContext(endpointID, name). A value without the "enc:v1:" prefix
// is read as clear text (rows written before sealing; drivers seal them
// at open). Key rotation re-seals each value with the same context.

// HeaderContext is the sealing context of one header value of an
// endpoint: "<endpoint id>/headers/<name>".
func HeaderContext(endpointID, name string) string {
	return endpointID + "/headers/" + name
}

// SealHeaders returns h with every value sealed by box (nil box: h as is).
// The result is what drivers store in endpoints.headers (as JSON).
func SealHeaders(box SecretBox, endpointID string, h map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(h))
	for name, v := range h {
		sealed, err := SealBytes(box, HeaderContext(endpointID, name), []byte(v))
		if err != nil {
			return nil, fmt.Errorf("seal header %s: %w", name, err)
		}
		out[name] = sealed
	}
	return out, nil
}

// OpenHeaders reverses SealHeaders; clear values are returned as they are.
// A sealed value box cannot open is an error (the wrong key).
func OpenHeaders(box SecretBox, endpointID string, h map[string]string) (map[string]string, error) {
	if h == nil {
		return nil, nil
	}
	out := make(map[string]string, len(h))
	for name, v := range h {
		b, err := OpenBytes(box, HeaderContext(endpointID, name), v)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		out[name] = string(b)
	}
	return out, nil
}

// HeadersSealed reports whether every value of a stored headers object is
// sealed (drivers use it to find rows to seal at open).
func HeadersSealed(h map[string]string) bool {
	for _, v := range h {
		if len(v) < len(sealedPrefix) || v[:len(sealedPrefix)] != sealedPrefix {
			return false
		}
	}
	return true
}
