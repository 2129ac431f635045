package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Pinger is implemented by every kind: Ping checks that the store answers
// (pgimageai doctor's "stores reachable") without reading an object: a
// HeadBucket for s3 (a 403 counts as an answer: keys may be scoped to
// objects), a HEAD of the base URL for http (any answer but 5xx and 429),
// a stat of the directory for file. Its errors are transient *Error values
// (store_unavailable), or ctx's error.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Closer is implemented by every kind: Close lets go of the store's idle
// connections, for a store replaced by a change of its row. A closed store
// still works (it dials again).
type Closer interface {
	Close() error
}

func (s *s3Store) Ping(ctx context.Context) error {
	return s.lim.do(ctx, func(ctx context.Context) error {
		_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
		if err == nil {
			return nil
		}
		err = s3Error(err)
		switch ReasonOf(err) {
		case ReasonForbidden:
			return nil
		case ReasonNotFound:
			return transient(fmt.Errorf("bucket %q does not exist: %w", s.bucket, err))
		}
		return asTransient(err)
	})
}

func (s *s3Store) Close() error {
	if c, ok := s.client.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return nil
}

func (s *httpStore) Ping(ctx context.Context) error {
	return s.lim.do(ctx, func(ctx context.Context) error {
		req, err := s.newRequest(ctx, http.MethodHead, s.base)
		if err != nil {
			return err
		}
		resp, err := s.client.Do(req)
		if err != nil {
			return asTransient(httpTransportError(err))
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return statusError(resp)
		}
		return nil
	})
}

func (s *httpStore) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

func (s *fileStore) Ping(ctx context.Context) error {
	st, err := os.Stat(s.dir)
	if err != nil {
		return transient(err)
	}
	if !st.IsDir() {
		return transient(fmt.Errorf("%s is no longer a directory", s.dir))
	}
	return nil
}

func (s *fileStore) Close() error { return nil }

var (
	_ Pinger = (*s3Store)(nil)
	_ Pinger = (*httpStore)(nil)
	_ Pinger = (*fileStore)(nil)
	_ Closer = (*s3Store)(nil)
	_ Closer = (*httpStore)(nil)
	_ Closer = (*fileStore)(nil)
)

// asTransient makes a store's refusal of the store itself (a base URL at a
// private address, say) an outage of the store for Ping; ctx's errors pass.
func asTransient(err error) error {
	var e *Error
	if errors.As(err, &e) && !e.Transient {
		return transient(err)
	}
	return err
}
