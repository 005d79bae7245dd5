// Package svgtext reads the text of an SVG document, for tests that check what a chart says.
package svgtext

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// Texts parses an SVG document and returns the contents of its text elements, in order. A document
// whose root is not svg is an error.
func Texts(b []byte) ([]string, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var (
		texts  []string
		inText bool
		root   string
	)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	if root != "svg" {
		return nil, fmt.Errorf("root element %q, want svg", root)
	}
	return texts, nil
}
