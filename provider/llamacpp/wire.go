package llamacpp

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// request is the body of POST {base_url}/embeddings. Its inputs take one
// of two shapes, both from llama.cpp's tools/server/README.md:
//
//   - content (POST /v1/embeddings, "For multimodal models … each element of
//     input can also be an object with a content array, using the same parts
//     as /v1/chat/completions"): {"content":[{"type":"image_url","image_url":
//     {"url":DATA_URL}},{"type":"text","text":TEXT}]};
//   - multimodal_data (POST /completion, "A JSON object which optionally
//     contains multimodal data", which /embeddings accepts too):
//     {"prompt_string":MARKER+TEXT,"multimodal_data":[BASE64]}, MARKER being
//     GET /props' media_marker.
//
// Either way the image is followed by text: see DefaultText.
type request struct {
	Model string `json:"model"`
	Input []any  `json:"input"`
}

type contentInput struct {
	Content []httpjson.Part `json:"content"`
}

type multimodalInput struct {
	PromptString   string   `json:"prompt_string"`
	MultimodalData []string `json:"multimodal_data"`
}

// newRequest builds the request for dataURLs in the given shape (content or
// multimodal_data) with marker (multimodal_data only) and text after each
// image.
func newRequest(model, shape, marker, text string, dataURLs []string) request {
	r := request{Model: model, Input: make([]any, len(dataURLs))}
	for i, u := range dataURLs {
		if shape == ShapeMultimodalData {
			_, b64, _ := strings.Cut(u, ";base64,")
			r.Input[i] = multimodalInput{PromptString: marker + text, MultimodalData: []string{b64}}
			continue
		}
		r.Input[i] = contentInput{Content: []httpjson.Part{
			httpjson.ImagePart(u),
			httpjson.TextPart(text),
		}}
	}
	return r
}

// props is the part of GET /props that picks the request shape and the
// concurrency to start from: media_marker, and total_slots, the requests the
// server serves at once (its --parallel; tools/server/README.md, "GET
// /props").
type props struct {
	MediaMarker string `json:"media_marker"`
	TotalSlots  int    `json:"total_slots"`
}

// answer is either shape llama-server answers with: the OpenAI-style object
// {"data":[…],"usage":{…}} or its native array [{"index":i,"embedding":…}].
type answer struct {
	Data  []item
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	}
}

// item is one input's embedding, kept raw: a vector, or an array of vectors.
type item struct {
	Index     *int            `json:"index"`
	Embedding json.RawMessage `json:"embedding"`
}

// UnmarshalJSON accepts both answer shapes.
func (a *answer) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		return json.Unmarshal(t, &a.Data)
	}
	var obj struct {
		Data  []item `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	a.Data, a.Usage = obj.Data, obj.Usage
	return nil
}

// vector decodes an embedding: a flat vector, or an array holding exactly
// one vector (llama.cpp's native answer with pooling).
func (it item) vector() ([]float32, error) {
	raw := bytes.TrimSpace(it.Embedding)
	if len(raw) > 1 && raw[0] == '[' && bytes.TrimSpace(raw[1:])[0] == '[' {
		var vs [][]float32
		if err := json.Unmarshal(raw, &vs); err != nil {
			return nil, provider.Errorf(provider.BadResponse, "invalid response: embedding: %v", err)
		}
		if len(vs) != 1 {
			return nil, provider.Errorf(provider.BadResponse,
				"answer has %d per-token vectors for one image; start llama-server with --pooling mean, cls or last", len(vs))
		}
		return vs[0], nil
	}
	var v []float32
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, provider.Errorf(provider.BadResponse, "invalid response: embedding: %v", err)
		}
	}
	return v, nil
}

// vectors orders the answer's vectors by index; see httpjson.ByIndex.
func (a answer) vectors(n int) ([][]float32, error) {
	if len(a.Data) == 0 {
		return nil, provider.Errorf(provider.BadResponse, "answer has no embeddings for %d inputs", n)
	}
	out := make([][]float32, n)
	for pos, it := range a.Data {
		i := pos
		if it.Index != nil {
			i = *it.Index
		}
		if i < 0 || i >= n {
			return nil, provider.Errorf(provider.BadResponse, "answer has an embedding for input %d of %d", i, n)
		}
		if out[i] != nil {
			return nil, provider.Errorf(provider.BadResponse, "answer has two embeddings for input %d", i)
		}
		v, err := it.vector()
		if err != nil {
			return nil, err
		}
		if len(v) == 0 {
			return nil, provider.Errorf(provider.BadResponse, "answer has an empty embedding for input %d", i)
		}
		out[i] = v
	}
	for i, v := range out {
		if v == nil {
			return nil, provider.Errorf(provider.BadResponse, "answer has %d embeddings for %d inputs (none for input %d)", len(a.Data), n, i)
		}
	}
	return out, nil
}
