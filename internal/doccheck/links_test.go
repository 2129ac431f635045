package doccheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, two levels up from this package.
const root = "../.."

// docFiles are the Markdown files a user reads.
func docFiles(t testing.TB) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	if len(docs) < 5 {
		t.Fatalf("found %d files in docs/, want the documentation there", len(docs))
	}
	return files
}

// doc is one Markdown file: its anchors and its links, fenced blocks left out.
type doc struct {
	anchors map[string]bool
	links   []link
	// unclosed is the line of a fence that is never closed; 0 when none.
	unclosed int
}

type link struct {
	line   int
	target string
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// parse reads a Markdown file the way GitHub renders it, as far as links,
// headings and fences go.
func parse(t testing.TB, path string) doc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := doc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence, fenceLine := "", 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			c := trimmed[:1]
			fence = strings.Repeat(c, len(trimmed)-len(strings.TrimLeft(trimmed, c)))
			fenceLine = n
			continue
		}
		if strings.HasPrefix(line, "#") {
			text := strings.TrimSpace(strings.TrimLeft(line, "#"))
			a := slug(text)
			if k := seen[a]; k > 0 {
				d.anchors[a+"-"+strconv.Itoa(k)] = true
			} else {
				d.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		plain := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(plain, -1) {
			d.links = append(d.links, link{n, m[1]})
		}
		if m := refLink.FindStringSubmatch(plain); m != nil {
			d.links = append(d.links, link{n, m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if fence != "" {
		d.unclosed = fenceLine
	}
	return d
}

// slug is GitHub's heading anchor: lower case, punctuation other than - and
// _ dropped, spaces to -. Markup in the heading (code, links) counts by its
// text.
func slug(heading string) string {
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestDocLinks(t *testing.T) {
	parsed := map[string]doc{}
	get := func(rel string) (doc, bool) {
		if d, ok := parsed[rel]; ok {
			return d, true
		}
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			return doc{}, false
		}
		d := parse(t, filepath.Join(root, rel))
		parsed[rel] = d
		return d, true
	}
	for _, file := range docFiles(t) {
		d, ok := get(file)
		if !ok {
			t.Errorf("%s is missing", file)
			continue
		}
		if d.unclosed > 0 {
			t.Errorf("%s:%d: a fenced code block that is never closed", file, d.unclosed)
		}
		for _, l := range d.links {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(file), path))
				if strings.HasPrefix(target, "..") {
					t.Errorf("%s:%d: link %s leaves the repository", file, l.line, l.target)
					continue
				}
			}
			td, ok := get(target)
			if !ok {
				t.Errorf("%s:%d: link %s: %s does not exist", file, l.line, l.target, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !td.anchors[anchor] {
				t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", file, l.line, l.target, target, anchor)
			}
		}
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"A least-privilege role", "a-least-privilege-role"},
		{"`pgimageai.models`", "pgimageaimodels"},
		{"Keys, and table shapes (new)", "keys-and-table-shapes-new"},
		{"Managed PostgreSQL: RDS & Aurora", "managed-postgresql-rds--aurora"},
		{"see [docs](x.md)", "see-docs"},
	}
	for _, tt := range tests {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

// TestParseCatchesFaults proves the checker sees what it must: a broken link,
// a missing anchor and an unclosed fence, in a file of its own.
func TestParseCatchesFaults(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.md")
	body := "# Title\n\nSee [a](#title) and [b](#nope) and `[c](#in-code)`.\n\n```sh\necho [d](#in-fence)\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	d := parse(t, p)
	if d.unclosed != 5 {
		t.Errorf("unclosed fence at line %d, want 5", d.unclosed)
	}
	if !d.anchors["title"] {
		t.Errorf("anchors %v, want title", d.anchors)
	}
	var targets []string
	for _, l := range d.links {
		targets = append(targets, l.target)
	}
	if strings.Join(targets, " ") != "#title #nope" {
		t.Errorf("links %v, want #title #nope (none from code spans or fences)", targets)
	}
}
