// Package xmltree reads a small XML document into a tree of elements that
// remember their line, for readers whose errors say
// "file: line N: <elem> what is wrong": NCCL topology files and MSCCL
// algorithms.
package xmltree

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Error locates a problem in an XML file.
type Error struct {
	File string
	Line int
	Elem string // element name without brackets, "" for syntax errors
	Msg  string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: line %d: ", e.File, e.Line)
	if e.Elem != "" {
		s += "<" + e.Elem + "> "
	}
	return s + e.Msg
}

// MaxDepth bounds nesting; the files read here nest a handful of levels.
const MaxDepth = 64

// Doc describes the documents a reader accepts.
type Doc struct {
	Root string // the one root element's name
	Kind string // what such a file is, for errors: "an NCCL topology XML file"
	// MaxElements bounds the element count, so hostile input stays cheap.
	MaxElements int
}

// Elem is an element and the line its start tag begins on.
type Elem struct {
	Name   string
	Line   int
	Attrs  []xml.Attr
	Kids   []*Elem
	Parent *Elem
	file   string
}

// Read parses the document into elements with their line numbers.
func (doc Doc) Read(r io.Reader, file string) (*Elem, error) {
	d := xml.NewDecoder(r)
	var root, cur *Elem
	n := 0
	depth := 0
	for {
		// The end of the previous token is where this one starts, so its line
		// is the line of the tag we are about to read.
		line, _ := d.InputPos()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return nil, &Error{File: file, Line: se.Line, Msg: "malformed XML: " + se.Msg}
			}
			l, _ := d.InputPos()
			return nil, &Error{File: file, Line: l, Msg: "malformed XML: " + err.Error()}
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n++
			depth++
			if n > doc.MaxElements {
				return nil, &Error{File: file, Line: line, Elem: t.Name.Local, Msg: fmt.Sprintf("too many elements (more than %d)", doc.MaxElements)}
			}
			if depth > MaxDepth {
				return nil, &Error{File: file, Line: line, Elem: t.Name.Local, Msg: fmt.Sprintf("nested more than %d levels deep", MaxDepth)}
			}
			e := &Elem{Name: t.Name.Local, Line: line, Attrs: t.Attr, Parent: cur, file: file}
			if cur == nil {
				if root != nil {
					return nil, e.Errorf("after the end of <%s>: a file holds one <%s>", doc.Root, doc.Root)
				}
				root = e
			} else {
				cur.Kids = append(cur.Kids, e)
			}
			cur = e
		case xml.EndElement:
			depth--
			if cur != nil {
				cur = cur.Parent
			}
		}
	}
	if root == nil {
		return nil, &Error{File: file, Line: 1, Msg: fmt.Sprintf("no <%s> element (is this %s?)", doc.Root, doc.Kind)}
	}
	if root.Name != doc.Root {
		return nil, root.Errorf("is not <%s>: %s starts with <%s>", doc.Root, doc.Kind, doc.Root)
	}
	return root, nil
}

// Errorf builds an Error located at e.
func (e *Elem) Errorf(format string, args ...any) error {
	return &Error{File: e.file, Line: e.Line, Elem: e.Name, Msg: fmt.Sprintf(format, args...)}
}

// Attr returns an attribute's value and whether it is present.
func (e *Elem) Attr(name string) (string, bool) {
	for _, a := range e.Attrs {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

// Str returns a required attribute.
func (e *Elem) Str(name string) (string, error) {
	v, ok := e.Attr(name)
	if !ok {
		return "", e.Errorf("missing attribute %q", name)
	}
	return v, nil
}

// Int reads an integer attribute the way NCCL's strtol(s, NULL, 0) into an
// int accepts it (decimal, 0x hex); def is used when it is absent and
// !required.
func (e *Elem) Int(name string, required bool, def int) (int, error) {
	v, ok := e.Attr(name)
	if !ok {
		if required {
			return 0, e.Errorf("missing attribute %q", name)
		}
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 32)
	if err != nil {
		return 0, e.Errorf("attribute %q: %q is not an integer", name, v)
	}
	return int(n), nil
}

// Float reads a finite number attribute of magnitude at most 1e15; def is
// used when it is absent and !required.
func (e *Elem) Float(name string, required bool, def float64) (float64, error) {
	v, ok := e.Attr(name)
	if !ok {
		if required {
			return 0, e.Errorf("missing attribute %q", name)
		}
		return def, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f != f || f > 1e15 || f < -1e15 {
		return 0, e.Errorf("attribute %q: %q is not a number", name, v)
	}
	return f, nil
}
