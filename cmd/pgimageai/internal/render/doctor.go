package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/pgimageai/pgimageai/doctor"
)

func writeDoctorTable(w io.Writer, r doctor.Report) error {
	var b strings.Builder
	for _, c := range r {
		fmt.Fprintf(&b, "%s %-28s %-24s %s\n", c.Status.Mark(), c.Area, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(&b, "  → %s\n", c.Fix)
		}
	}
	counts := map[doctor.Status]int{}
	for _, c := range r {
		counts[c.Status]++
	}
	fmt.Fprintf(&b, "\n%d passed, %d warnings, %d failed\n", counts[doctor.Pass], counts[doctor.Warn], counts[doctor.Fail])
	_, err := io.WriteString(w, b.String())
	return err
}

type doctorJSON struct {
	OK     bool        `json:"ok"`
	Checks []checkJSON `json:"checks"`
}

type checkJSON struct {
	Area   string `json:"area"`
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func writeDoctorJSON(w io.Writer, r doctor.Report) error {
	doc := doctorJSON{OK: r.Worst() != doctor.Fail, Checks: []checkJSON{}}
	for _, c := range r {
		doc.Checks = append(doc.Checks, checkJSON{Area: c.Area, Name: c.Name, Status: c.Status.String(), Detail: c.Detail, Fix: c.Fix})
	}
	return JSON(w, doc)
}

// WriteDoctor renders the checks of `pgimageai doctor` as format (table or json).
func WriteDoctor(w io.Writer, r doctor.Report, format string) error {
	if format == FormatJSON {
		return writeDoctorJSON(w, r)
	}
	return writeDoctorTable(w, r)
}
