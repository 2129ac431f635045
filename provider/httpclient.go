package provider

import (
	"fmt"
	"net/http"
	"net/url"
)

// NewHTTPClient returns the client a provider makes its requests with, over
// transport t (nil = http.DefaultTransport). It follows no redirect, not
// even to the same origin: Go's default client would send the request again
// to the Location — the image, and the Authorization header when the host is
// the same or a subdomain — and take the answer of whatever is there as the
// provider's. A 3xx answer comes back as it is, for Redirected to turn into
// an error. The client is safe for concurrent use.
func NewHTTPClient(t http.RoundTripper) *http.Client {
	return &http.Client{Transport: t, CheckRedirect: refuseRedirect}
}

// refuseRedirect is the CheckRedirect of NewHTTPClient: the redirect's
// answer is returned, its Location not requested.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Redirected returns the error of an answer that redirects (a 3xx status),
// or nil for any other: Permanent, so that the row is a provider_error at
// once (the same request would be redirected again), its message naming the
// status and the origin of the Location (scheme and host, never its user
// information, path or query, which may carry a token).
func Redirected(resp *http.Response) *Error {
	if resp.StatusCode < 300 || resp.StatusCode > 399 {
		return nil
	}
	to := "without a Location"
	if loc := resp.Header.Get("Location"); loc != "" {
		to = "to an unreadable Location"
		if u, err := url.Parse(loc); err == nil {
			if resp.Request != nil && resp.Request.URL != nil {
				u = resp.Request.URL.ResolveReference(u)
			}
			if u.Scheme != "" && u.Host != "" {
				to = "to " + (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
			}
		}
	}
	return &Error{Kind: Permanent, Status: resp.StatusCode,
		Message: fmt.Sprintf("the provider redirected %s; redirects are not followed (set base_url to the address that answers)", to)}
}
