package result

import (
	"errors"
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// EncodeHistogram is a latency histogram as summaries store it (latency_hdr): HdrHistogram's V2
// compressed encoding in base64, the format of HdrHistogram's interval logs, which its tools read.
// Percentiles alone cannot be combined; histograms can (tunnelbench merge).
func EncodeHistogram(h *hdrhistogram.Histogram) (string, error) {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return "", fmt.Errorf("encode latency histogram: %w", err)
	}
	return string(b), nil
}

// DecodeHistogram reads what EncodeHistogram wrote.
func DecodeHistogram(s string) (*hdrhistogram.Histogram, error) {
	if s == "" {
		return nil, errors.New("no latency histogram")
	}
	h, err := hdrhistogram.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("latency histogram: %w", err)
	}
	return h, nil
}
