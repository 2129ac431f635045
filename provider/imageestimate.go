package provider

// TokenRule is how a model counts the input tokens of one image from its
// pixels, as its provider documents it.
type TokenRule struct {
	Name   string               // which rule, and where it is documented
	Tokens func(w, h int) int64 // the input tokens of one w × h image, as sent
}

// ImageTokenCounter is implemented by a provider whose models document how
// they count the input tokens of an image (OpenAI's 512-px tiles, Voyage's
// pixels). ImageTokenRule returns false for a model of the provider that has
// no such rule.
type ImageTokenCounter interface {
	ImageTokenRule() (TokenRule, bool)
}

// ImageTokenRuleOf returns the documented image token rule of the model p
// serves, or false when there is none (then only the usage a model reported
// tells what an image costs).
func ImageTokenRuleOf(p Provider) (TokenRule, bool) {
	if c, ok := p.(ImageTokenCounter); ok {
		return c.ImageTokenRule()
	}
	return TokenRule{}, false
}

// SentSize is the size in pixels at which a model with options o, served by
// p, is sent an image of w × h pixels: fit by Normalization(p), or as stored
// when normalisation is off. It is what the bridge does, for estimates.
func (o Options) SentSize(p Provider, w, h int) (int, int) {
	s := o.Normalization(p)
	if !s.Enabled {
		return w, h
	}
	return s.Size.Fit(w, h)
}
