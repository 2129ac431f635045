package render

import (
	"encoding/json"
	"image"
	"reflect"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/estimate"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// TestEstimateSwitch: the backfill of a rule whose model changed is the
// switch's cost, in the text and the JSON; no word of it without a change.
func TestEstimateSwitch(t *testing.T) {
	e := estimate.Report{
		Rule:      state.RuleListing{Name: "embed", Function: "AI_IMAGE_EMBED", Model: "emb", SourceTable: "public.photos", ImageColumn: "img"},
		Model:     provider.Model{Name: "emb", Provider: "voyage", Model: "voyage-multimodal-3"},
		Scan:      estimate.Scan{Rows: 1000, Read: 1000, WithImage: 1000, Sizes: make([]image.Point, 1000)},
		TokenRule: "Voyage's rule", InputPerImage: 1000, PriceIn: 0.12,
	}
	if got := estimateText(e); strings.Contains(got, "Switch") || strings.Contains(got, "Change") {
		t.Errorf("an estimate without a change speaks of one:\n%s", got)
	}
	if j := estimateDocument(e); j.Change != nil {
		t.Errorf("version_change = %+v, want null", j.Change)
	}
	e.Change = &estimate.VersionChange{Kind: estimate.ChangeSwitch, From: "aaaaaaaa00000001", FromModelID: "text-embedding-3-small", To: "bbbbbbbb00000002", ToModelID: "voyage-multimodal-3"}
	want := "Backfill: 1000 calls, 1000000 input tokens, cost 0.12000 (at the model's price_per_1m_* options)\n" +
		"Switch: changing to version voyage-multimodal-3 (bbbbbbbb) re-computes every row on the side, so the backfill above is its cost: 1000 calls, 1000000 input tokens, cost 0.12000 (at the model's price_per_1m_* options); " +
		"the live column keeps text-embedding-3-small (aaaaaaaa) until one transaction switches it\n" +
		"Per 1,000 new rows like these:"
	if got := estimateText(e); !strings.Contains(got, want) {
		t.Errorf("estimate:\n%s\nwant it to hold:\n%s", got, want)
	}
	b, err := json.Marshal(estimateDocument(e))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	wantJSON := map[string]any{"kind": "switch", "from_version": "aaaaaaaa00000001", "from_model_id": "text-embedding-3-small",
		"to_version": "bbbbbbbb00000002", "to_model_id": "voyage-multimodal-3", "switch_state": nil,
		"calls": 1000.0, "input_tokens": 1e6, "output_tokens": 0.0, "cost": 0.12, "batch_api": false}
	if !reflect.DeepEqual(doc["version_change"], wantJSON) {
		t.Errorf("version_change = %#v\nwant %#v", doc["version_change"], wantJSON)
	}

	e.Change = &estimate.VersionChange{Kind: estimate.ChangeInPlace, From: "aaaaaaaa00000001", To: "bbbbbbbb00000002", ToModelID: "voyage-multimodal-3"}
	if got := estimateText(e); !strings.Contains(got, "Change: changing to version voyage-multimodal-3 (bbbbbbbb) re-computes every row in place, so the backfill above is its cost: 1000 calls") ||
		!strings.Contains(got, "rows keep results of aaaaaaaa (not recorded) until they are computed again") {
		t.Errorf("in place:\n%s", got)
	}
	e.Change = &estimate.VersionChange{Kind: estimate.ChangeSwitch, From: "aaaaaaaa00000001", To: "bbbbbbbb00000002", ToModelID: "voyage-multimodal-3", SwitchState: "aborted"}
	if got := estimateText(e); !strings.Contains(got, "; its switch was aborted: the bridge does not start it again until the rule's version changes again\n") {
		t.Errorf("aborted:\n%s", got)
	}
	e.Change.SwitchState = "held"
	if got := estimateText(e); !strings.Contains(got, "; its switch is running (held): pgimageai status shows how far\n") {
		t.Errorf("running:\n%s", got)
	}
}
