package xmltree

import (
	"errors"
	"strings"
	"testing"
)

var doc = Doc{Root: "algo", Kind: "a test file", MaxElements: 4}

func TestRead(t *testing.T) {
	root, err := doc.Read(strings.NewReader("<algo a=\"1\">\n  <gpu\n    id=\"0x1f\"/>\n  <gpu id=\" 7 \"/>\n</algo>\n"), "f.xml")
	if err != nil {
		t.Fatal(err)
	}
	if root.Name != "algo" || len(root.Kids) != 2 || root.Kids[0].Parent != root {
		t.Fatalf("tree %+v", root)
	}
	g := root.Kids[0]
	if g.Line != 2 { // where the start tag begins, not where it ends
		t.Errorf("line %d, want 2", g.Line)
	}
	if v, err := g.Int("id", true, 0); v != 31 || err != nil {
		t.Errorf("hex id = %d, %v", v, err)
	}
	if v, err := root.Kids[1].Int("id", true, 0); v != 7 || err != nil {
		t.Errorf("spaced id = %d, %v", v, err)
	}
	if v, err := g.Int("absent", false, -1); v != -1 || err != nil {
		t.Errorf("default = %d, %v", v, err)
	}
	if _, err := g.Int("absent", true, 0); errString(err) != `f.xml: line 2: <gpu> missing attribute "absent"` {
		t.Errorf("missing int: %v", err)
	}
	if _, err := g.Str("absent"); errString(err) != `f.xml: line 2: <gpu> missing attribute "absent"` {
		t.Errorf("missing string: %v", err)
	}
	big, err := doc.Read(strings.NewReader(`<algo x="4294967296" y="1e16" z="2.5"/>`), "f.xml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Int("x", true, 0); errString(err) != `f.xml: line 1: <algo> attribute "x": "4294967296" is not an integer` {
		t.Errorf("int beyond 32 bits: %v", err)
	}
	if _, err := big.Float("y", true, 0); errString(err) != `f.xml: line 1: <algo> attribute "y": "1e16" is not a number` {
		t.Errorf("huge float: %v", err)
	}
	if v, err := big.Float("z", true, 0); v != 2.5 || err != nil {
		t.Errorf("float = %g, %v", v, err)
	}
}

func TestReadErrors(t *testing.T) {
	for _, c := range []struct{ name, xml, want string }{
		{"empty", ``, `f.xml: line 1: no <algo> element (is this a test file?)`},
		{"wrong root", "\n<graph/>", `f.xml: line 2: <graph> is not <algo>: a test file starts with <algo>`},
		{"two roots", "<algo/>\n<algo/>", `f.xml: line 2: <algo> after the end of <algo>: a file holds one <algo>`},
		{"too many", "<algo><a/><b/>\n<c/><d/></algo>", `f.xml: line 2: <d> too many elements (more than 4)`},
		{"too deep", "<algo>" + strings.Repeat("<x>", MaxDepth) + strings.Repeat("</x>", MaxDepth) + "</algo>",
			`f.xml: line 1: <x> nested more than 64 levels deep`},
		{"malformed", "<algo>\n<gpu>\n</algo>", `f.xml: line 3: malformed XML: element <gpu> closed by </algo>`},
	} {
		d := doc
		if c.name == "too deep" {
			d.MaxElements = 1000
		}
		_, err := d.Read(strings.NewReader(c.xml), "f.xml")
		var xe *Error
		if !errors.As(err, &xe) || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
