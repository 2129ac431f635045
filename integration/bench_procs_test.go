package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The database's CPU by process: which backend spends what of a phase's
// database CPU (the walsender, the bridge's writes, its page reads), so
// that the benchmark's log says where the database's share of a row goes.

// containerProcs returns the CPU time so far of each process of the
// database's container, by its PID inside the container (from the host's
// /proc: a process whose cgroup names the container).
func containerProcs(s *source) map[int]time.Duration {
	id := s.db.Postgres().ContainerID()
	out := map[int]time.Duration{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cg, err := os.ReadFile(d + "/cgroup")
		if err != nil || !strings.Contains(string(cg), id) {
			continue
		}
		st, err := os.ReadFile(d + "/status")
		if err != nil {
			continue
		}
		nspid := 0
		for _, line := range strings.Split(string(st), "\n") {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(rest)
				nspid, _ = strconv.Atoi(f[len(f)-1])
			}
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if cpu, ok := pidCPU(pid); ok && nspid > 0 {
			out[nspid] = cpu
		}
	}
	return out
}

// pidCPU is procCPU that reports a process gone instead of failing.
func pidCPU(pid int) (cpu time.Duration, ok bool) {
	defer func() { ok = recover() == nil && ok }()
	return procCPU(nil, pid), true
}

// procBreakdown returns, over rows, the CPU µs per row of the container's
// processes that used the most since before, named by pg_stat_activity, and
// the rest of total (the container's CPU over the same time): the other
// processes, and those that exited meanwhile (a page connection closed,
// pg_recvlogical's walsender), which /proc no longer shows.
func procBreakdown(s *source, before map[int]time.Duration, total time.Duration, rows int) string {
	after := containerProcs(s)
	names := map[int]string{}
	if r, err := s.conn.Query(context.Background(), `SELECT pid, backend_type, coalesce(application_name, ''), left(regexp_replace(query, '\s+', ' ', 'g'), 40) FROM pg_stat_activity`); err == nil {
		for r.Next() {
			var pid int
			var bt, app, q string
			if r.Scan(&pid, &bt, &app, &q) == nil {
				names[pid] = fmt.Sprintf("%s %s %q", bt, app, q)
			}
		}
		r.Close()
	}
	type use struct {
		pid int
		cpu time.Duration
	}
	var uses []use
	for pid, cpu := range after {
		if d := cpu - before[pid]; d > 0 {
			uses = append(uses, use{pid, d})
		}
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].cpu > uses[j].cpu })
	var parts []string
	rest := total
	for i, u := range uses {
		if i == 6 {
			break
		}
		rest -= u.cpu
		name := names[u.pid]
		if name == "" {
			name = "other"
		}
		parts = append(parts, fmt.Sprintf("%.0f µs/row %s", float64(u.cpu.Microseconds())/float64(rows), name))
	}
	parts = append(parts, fmt.Sprintf("%.0f µs/row the rest", float64(max(rest, 0).Microseconds())/float64(rows)))
	return strings.Join(parts, "; ")
}
