package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pgimageai/pgimageai/doctor"
	"github.com/pgimageai/pgimageai/provider/cohere"
	"github.com/pgimageai/pgimageai/provider/jina"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/provider/voyage"
)

// errDoctorFailed: a check failed; the report says which and what to do.
var errDoctorFailed = errors.New("a check failed")

// defaultBaseURLs are the providers' own default base URLs, for the models
// that name none.
var defaultBaseURLs = map[string]string{
	"openai": openai.DefaultBaseURL, "ollama": openai.OllamaBaseURL,
	"voyage": voyage.DefaultBaseURL, "cohere": cohere.DefaultBaseURL, "jina": jina.DefaultBaseURL,
}

// doctorCommand checks the database and prints one line per check.
func doctorCommand(ctx context.Context, c config, stdout, _ io.Writer) error {
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := c.resolveSlotOn(ctx, source, target); err != nil {
		return err
	}
	report, err := doctor.Run(ctx, source.conn, target.conn, doctor.Config{
		Slot: c.Slot, Publication: c.Publication, Group: c.Group,
		Registry: registry(c.KeyEnv), Env: os.LookupEnv, BaseURLs: defaultBaseURLs,
	})
	if err != nil {
		return source.explain("check", err)
	}
	if c.Query.Format == formatJSON {
		err = writeDoctorJSON(stdout, report)
	} else {
		err = writeDoctorTable(stdout, report)
	}
	if err != nil {
		return err
	}
	if report.Worst() == doctor.Fail {
		return errDoctorFailed
	}
	return nil
}

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
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
