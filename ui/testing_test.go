package ui

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"
)

// doc is a rendered component, parsed, with lookups by data-testid.
type doc struct {
	t    *testing.T
	raw  string
	root *html.Node
}

// render renders c and parses the output as an HTML document.
func render(t *testing.T, c templ.Component) *doc {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	root, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return &doc{t: t, raw: buf.String(), root: root}
}

// all returns the elements with data-testid id, in document order.
func (d *doc) all(id string) []*html.Node {
	var out []*html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && attr(n, "data-testid") == id {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	return out
}

// one returns the only element with data-testid id.
func (d *doc) one(id string) *html.Node {
	d.t.Helper()
	ns := d.all(id)
	if len(ns) != 1 {
		d.t.Fatalf("want one data-testid=%q, found %d in\n%s", id, len(ns), d.raw)
	}
	return ns[0]
}

// none fails when an element with data-testid id exists.
func (d *doc) none(id string) {
	d.t.Helper()
	if n := len(d.all(id)); n > 0 {
		d.t.Fatalf("want no data-testid=%q, found %d", id, n)
	}
}

// attr returns an attribute's value ("" when absent).
func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// hasAttr reports whether the attribute is present.
func hasAttr(n *html.Node, name string) bool {
	for _, a := range n.Attr {
		if a.Key == name {
			return true
		}
	}
	return false
}

// text returns the element's text content, whitespace collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// within returns the descendants of n with data-testid id.
func within(n *html.Node, id string) []*html.Node {
	d := &doc{root: n}
	return d.all(id)
}
