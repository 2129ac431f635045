package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// blockedNets are the addresses an http store refuses unless allow_private:
// besides what netip's predicates name (loopback, private, link-local,
// unspecified, multicast), the shared address space (100.64.0.0/10, where
// some clouds keep their metadata service), "this network", benchmarking
// and reserved ranges.
var blockedNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fd00:ec2::/32"),
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// publicAddr reports whether ip is an address an http store may connect to
// without allow_private; if not, why.
func publicAddr(ip netip.Addr) (bool, string) {
	ip = ip.Unmap()
	if nat64.Contains(ip) { // a NAT64 address carries an IPv4 one
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case !ip.IsValid():
		return false, "not an address"
	case ip.IsLoopback():
		return false, "loopback"
	case ip.IsPrivate():
		return false, "private"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return false, "link-local (cloud metadata)"
	case ip.IsUnspecified():
		return false, "unspecified"
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return false, "multicast"
	}
	for _, p := range blockedNets {
		if p.Contains(ip) {
			return false, "reserved (" + p.String() + ")"
		}
	}
	return true, ""
}

// safeDialer resolves a host once per connection, checks every address it
// got, and connects only to a checked one: a name that resolves to a
// refused address (DNS rebinding included) is refused whole, before any
// connection.
type safeDialer struct {
	allowPrivate bool
	lookup       func(ctx context.Context, host string) ([]net.IP, error)
	dial         func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (d *safeDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, badRef("address %q: %v", addr, err)
	}
	addrs, err := d.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var last error
	for _, ip := range addrs {
		c, err := d.dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, transient(fmt.Errorf("connecting to %s: %w", host, last))
}

func (d *safeDialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		ips, err := d.lookup(ctx, host)
		if err != nil {
			var dnsErr *net.DNSError
			if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
				return nil, &Error{Reason: ReasonNotFound, Err: fmt.Errorf("host %q does not resolve", host)}
			}
			return nil, transient(fmt.Errorf("resolving %q: %w", host, err))
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok {
				addrs = append(addrs, a.Unmap())
			}
		}
		if len(addrs) == 0 {
			return nil, &Error{Reason: ReasonNotFound, Err: fmt.Errorf("host %q has no address", host)}
		}
	}
	if !d.allowPrivate {
		for _, a := range addrs {
			if ok, why := publicAddr(a); !ok {
				return nil, badRef("host %q is at %s, a %s address (allow_private is off)", host, a, why)
			}
		}
	}
	return addrs, nil
}

func (e Env) lookup() func(ctx context.Context, host string) ([]net.IP, error) {
	if e.LookupIP != nil {
		return e.LookupIP
	}
	return func(ctx context.Context, host string) ([]net.IP, error) {
		return net.DefaultResolver.LookupIP(ctx, "ip", host)
	}
}
