package voyage

import "github.com/pgimageai/pgimageai/provider/httpjson"

// request is the body of POST {base_url}/multimodalembeddings
// (https://docs.voyageai.com/reference/multimodal-embeddings-api).
type request struct {
	Model     string  `json:"model"`
	Inputs    []input `json:"inputs"`
	InputType string  `json:"input_type"`
}

type input struct {
	Content []part `json:"content"`
}

type part struct {
	Type        string `json:"type"`
	ImageBase64 string `json:"image_base64"`
}

func newRequest(model string, dataURLs []string) request {
	r := request{Model: model, Inputs: make([]input, len(dataURLs)), InputType: "document"}
	for i, u := range dataURLs {
		r.Inputs[i] = input{Content: []part{{Type: "image_base64", ImageBase64: u}}}
	}
	return r
}

// answer is Voyage's embeddings answer.
type answer struct {
	Data  []httpjson.Item `json:"data"`
	Usage struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}
