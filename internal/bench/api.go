package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// apiClient talks to Herald's HTTP API v1.
type apiClient struct {
	base, key string
	hc        *http.Client
	auth      string
}

func newAPIClient(base, key string, conns int) *apiClient {
	return &apiClient{base: base, key: key, hc: loadClient(conns), auth: "Bearer " + key}
}

// call sends one request and decodes a 2xx JSON answer into out (when not
// nil). Other statuses are errors with the problem's text.
func (c *apiClient) call(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bodyExcerpt(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
}

func (c *apiClient) createEndpoint(ctx context.Context, tenant, url string) (string, error) {
	body, _ := json.Marshal(map[string]any{"tenant": tenant, "url": url, "description": "herald bench"})
	var out struct {
		ID string `json:"id"`
	}
	if err := c.call(ctx, http.MethodPost, "/v1/endpoints", body, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// setState pauses or resumes an endpoint (action "pause" or "resume").
func (c *apiClient) setState(ctx context.Context, id, action string) error {
	return c.call(ctx, http.MethodPost, "/v1/endpoints/"+id+"/"+action, nil, nil)
}

// publish posts one event body and returns the answer's status; a non-2xx
// answer is also an error with the problem's text. A non-empty
// idempotencyKey is sent as Idempotency-Key, so the publish can be retried.
func (c *apiClient) publish(ctx context.Context, body []byte, idempotencyKey ...string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	if len(idempotencyKey) > 0 && idempotencyKey[0] != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey[0])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, fmt.Errorf("publish: %s: %s", resp.Status, bodyExcerpt(b))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

type deliveryOut struct {
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
}

// eventDeliveries lists the deliveries of an event.
func (c *apiClient) eventDeliveries(ctx context.Context, eventID string) ([]deliveryOut, error) {
	var out struct {
		Data []deliveryOut `json:"data"`
	}
	raw := json.RawMessage{}
	if err := c.call(ctx, http.MethodGet, "/v1/events/"+eventID+"/deliveries?limit=100", nil, &raw); err != nil {
		return nil, err
	}
	// The answer is a list object; accept a bare array too.
	if len(raw) > 0 && raw[0] == '[' {
		err := json.Unmarshal(raw, &out.Data)
		return out.Data, err
	}
	err := json.Unmarshal(raw, &out)
	return out.Data, err
}

// metrics reads /metrics into "name{labels}" → value.
func (c *apiClient) metrics(ctx context.Context) (promValues, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseProm(resp.Body)
}

// promValues maps a Prometheus series ("name" or `name{label="v"}`) to its
// value.
type promValues map[string]float64

func parseProm(r io.Reader) (promValues, error) {
	out := promValues{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sum adds the series of one metric name (every label set).
func (p promValues) sum(name string) float64 {
	var s float64
	for k, v := range p {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// byLabel returns the series of one metric name by the value of its only
// label, e.g. herald_queue_depth by state.
func (p promValues) byLabel(name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range p {
		rest, ok := strings.CutPrefix(k, name+"{")
		if !ok {
			continue
		}
		_, val, ok := strings.Cut(rest, `="`)
		if !ok {
			continue
		}
		val, _, _ = strings.Cut(val, `"`)
		out[val] = v
	}
	return out
}

// minBodyBytes is the smallest --body-bytes: an envelope with an empty pad
// takes about 200 bytes (it depends on the tenant and type names).
const minBodyBytes = 256

// eventMaker builds publish requests whose delivered body (the envelope
// {"id","type","tenant","occurred_at","data"}) has a fixed size:
// data is {"seq":"<9 digits>","sent_ns":<19 digits>,"pad":"x…"}.
type eventMaker struct {
	tenant, typ string
	occurred    time.Time
	occurredStr string
	pad         string
}

func newEventMaker(tenant, typ string, bodyBytes int) *eventMaker {
	// A fixed occurred_at whose RFC 3339 form has all 9 fractional digits,
	// so every envelope has the same length.
	occ := time.Now().UTC().Truncate(time.Second).Add(123456789)
	m := &eventMaker{tenant: tenant, typ: typ, occurred: occ, occurredStr: occ.Format(time.RFC3339Nano)}
	if bodyBytes > 0 {
		if n := bodyBytes - len(m.envelope(0, 0)); n > 0 {
			m.pad = strings.Repeat("x", n)
		}
	}
	return m
}

const sentPlaceholder = 1_000_000_000_000_000_000 // 19 digits, like every Unix ns time until 2286

func (m *eventMaker) data(seq int, sentNS int64) []byte {
	if sentNS <= 0 {
		sentNS = sentPlaceholder
	}
	b := make([]byte, 0, 64+len(m.pad))
	b = append(b, `{"seq":"`...)
	s := strconv.Itoa(seq % 1_000_000_000)
	for i := len(s); i < 9; i++ {
		b = append(b, '0')
	}
	b = append(b, s...)
	b = append(b, `","sent_ns":`...)
	b = strconv.AppendInt(b, sentNS, 10)
	b = append(b, `,"pad":"`...)
	b = append(b, m.pad...)
	b = append(b, `"}`...)
	return b
}

// publishBody is the POST /v1/events body of event seq, stamped sentNS.
func (m *eventMaker) publishBody(seq int, sentNS int64) []byte {
	d := m.data(seq, sentNS)
	b := make([]byte, 0, len(d)+128)
	b = append(b, `{"tenant":"`...)
	b = append(b, m.tenant...)
	b = append(b, `","type":"`...)
	b = append(b, m.typ...)
	b = append(b, `","occurred_at":"`...)
	b = append(b, m.occurredStr...)
	b = append(b, `","data":`...)
	b = append(b, d...)
	b = append(b, '}')
	return b
}

// envelope is the body Herald delivers for event seq (with a new event id
// of Herald's format), byte for byte the same size as a real delivery's.
func (m *eventMaker) envelope(seq int, sentNS int64) []byte {
	b, err := store.EncodeBody(store.NewID("evt"), m.typ, m.tenant, m.occurred, m.data(seq, sentNS))
	if err != nil {
		panic(err) // the data is valid JSON by construction
	}
	return b
}
