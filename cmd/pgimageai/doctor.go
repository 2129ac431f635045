package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
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
	if err := render.WriteDoctor(stdout, report, c.Query.Format); err != nil {
		return err
	}
	if report.Worst() == doctor.Fail {
		return errDoctorFailed
	}
	return nil
}
