//go:build darwin || freebsd || netbsd || openbsd

package wasmdec

const mapNoReserve = 0
