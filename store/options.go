package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/internal/suggest"
)

// Defaults of the options column.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxConcurrency = 8
	DefaultRetries        = 2
	maxRetries            = 10
	maxConcurrencyLimit   = 1024
)

// Options is the parsed options column of a store. The zero value of a
// field the row did not set is replaced by its default by parseOptions.
type Options struct {
	MaxBytes       int64         // max_bytes: a bound of the store's own, below the caller's (0 = the caller's alone)
	Timeout        time.Duration // timeout: one attempt (a HEAD, or a GET and its whole body); "30s", or a number of seconds
	MaxConcurrency int           // max_concurrency: requests in flight to this store at once
	Retries        int           // retries: further attempts after a transient failure, with backoff
	PathStyle      bool          // path_style (s3): https://endpoint/bucket/key instead of https://bucket.endpoint/key
	AllowHosts     []string      // allow_hosts (http): further hosts an absolute URL may name ("cdn.example.com", "*.example.com")
	AllowPrivate   bool          // allow_private (http): loopback, private and link-local addresses allowed
	AllowHTTP      bool          // allow_http (http): plain http allowed besides https
}

// optionKinds says which kinds accept an option; nil = every kind.
var optionKinds = map[string][]string{
	"max_bytes":       nil,
	"timeout":         nil,
	"max_concurrency": nil,
	"retries":         nil,
	"path_style":      {"s3"},
	"allow_hosts":     {"http"},
	"allow_private":   {"http"},
	"allow_http":      {"http"},
}

func optionNames() []string {
	names := make([]string, 0, len(optionKinds))
	for n := range optionKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// parseOptions parses the options column strictly: an unknown option, one
// the kind does not take, or a value of the wrong type or range is an error
// that names it.
func parseOptions(kind string, raw json.RawMessage) (Options, error) {
	o := Options{Timeout: DefaultTimeout, MaxConcurrency: DefaultMaxConcurrency, Retries: DefaultRetries}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return o, fmt.Errorf("options: not a JSON object: %w", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		kinds, known := optionKinds[k]
		if !known {
			return o, fmt.Errorf("options: unknown option %q%s; known: %s", k, suggest.Hint(k, optionNames()), strings.Join(optionNames(), ", "))
		}
		if kinds != nil && !slices.Contains(kinds, kind) {
			return o, fmt.Errorf("options: %q applies only to %s stores, not %s", k, strings.Join(kinds, ", "), kind)
		}
		var err error
		switch k {
		case "max_bytes":
			err = intOption(v, &o.MaxBytes, 1, 1<<40)
		case "timeout":
			o.Timeout, err = durationOption(v)
		case "max_concurrency":
			var n int64
			err = intOption(v, &n, 1, maxConcurrencyLimit)
			o.MaxConcurrency = int(n)
		case "retries":
			var n int64
			err = intOption(v, &n, 0, maxRetries)
			o.Retries = int(n)
		case "path_style":
			err = boolOption(v, &o.PathStyle)
		case "allow_private":
			err = boolOption(v, &o.AllowPrivate)
		case "allow_http":
			err = boolOption(v, &o.AllowHTTP)
		case "allow_hosts":
			o.AllowHosts, err = hostsOption(v)
		}
		if err != nil {
			return o, fmt.Errorf("options: %s: %w", k, err)
		}
	}
	return o, nil
}

func intOption(v json.RawMessage, dst *int64, lo, hi int64) error {
	var f json.Number
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&f); err != nil {
		return fmt.Errorf("want an integer, got %s", v)
	}
	n, err := f.Int64()
	if err != nil {
		return fmt.Errorf("want an integer, got %s", v)
	}
	if n < lo || n > hi {
		return fmt.Errorf("%d is out of range [%d, %d]", n, lo, hi)
	}
	*dst = n
	return nil
}

func boolOption(v json.RawMessage, dst *bool) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("want true or false, got %s", v)
	}
	return nil
}

// durationOption takes "30s", "1m30s" or a number of seconds (30, 0.5).
func durationOption(v json.RawMessage) (time.Duration, error) {
	var d time.Duration
	var s string
	var f float64
	switch {
	case json.Unmarshal(v, &s) == nil:
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("want a duration like \"30s\", got %q", s)
		}
	case json.Unmarshal(v, &f) == nil:
		d = time.Duration(f * float64(time.Second))
	default:
		return 0, fmt.Errorf("want a duration like \"30s\" or a number of seconds, got %s", v)
	}
	if d < 10*time.Millisecond || d > time.Hour {
		return 0, fmt.Errorf("%s is out of range [10ms, 1h]", d)
	}
	return d, nil
}

func hostsOption(v json.RawMessage) ([]string, error) {
	var hosts []string
	if err := json.Unmarshal(v, &hosts); err != nil {
		return nil, fmt.Errorf("want an array of host names, got %s", v)
	}
	for i, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		bare := strings.TrimPrefix(h, "*.")
		if bare == "" || strings.ContainsAny(bare, "/@*?#[] ") && !strings.HasPrefix(bare, "[") {
			return nil, fmt.Errorf("%q is not a host name (want \"cdn.example.com\", \"cdn.example.com:8443\" or \"*.example.com\")", hosts[i])
		}
		hosts[i] = h
	}
	return hosts, nil
}

// hostAllowed reports whether host (lower case, with ":port" when the URL
// has one) matches an allow_hosts entry: exactly, or as a subdomain of a
// "*." entry; an entry without a port matches the host on any port.
func hostAllowed(allow []string, hostname, port string) bool {
	hostname = strings.ToLower(hostname)
	for _, a := range allow {
		ah, ap := a, ""
		if i := strings.LastIndex(a, ":"); i >= 0 && !strings.HasSuffix(a, "]") {
			ah, ap = a[:i], a[i+1:]
		}
		ah = strings.Trim(ah, "[]")
		if ap != "" && ap != port {
			continue
		}
		if suffix, ok := strings.CutPrefix(ah, "*."); ok {
			if strings.HasSuffix(hostname, "."+suffix) {
				return true
			}
			continue
		}
		if hostname == ah {
			return true
		}
	}
	return false
}
