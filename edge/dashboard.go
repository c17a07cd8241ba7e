package edge

import (
	"embed"
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spangledb/spangle/node"
)

// dashboardRefresh is how often, in seconds, the dashboard reloads itself.
const dashboardRefresh = 5

//go:embed dashboard.html
var dashboardFS embed.FS

// dashboardPage is the dashboard template's data.
type dashboardPage struct {
	NodeName string
	ShardID  string
	Release  string // the spangle release the node runs
	DB       string // set on a db's own page
	DBs      map[string]node.DBStatus
	// SourceError is why the source could not be listed.
	SourceError string
	Refresh     int
	Now         time.Time
}

var dashboardFuncs = template.FuncMap{
	// A range's hyphen does not break ("0-\n1" read as two numbers).
	"ranges":  func(ps []int) string { return strings.ReplaceAll(partitionRanges(ps), "-", "\u2011") },
	"bytes":   humanBytes,
	"pathEsc": url.PathEscape,
	"timestamp": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format(time.RFC3339)
	},
	"seconds": seconds,
	"pct":     func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"avg":     func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"clamp": func(f float64) float64 {
		return min(max(f, 0), 100)
	},
}

// seconds writes a duration in seconds at a precision a reader wants:
// milliseconds under a second ("37ms"), tenths under a minute ("4.2s"),
// whole seconds above ("2m5s"). It wrote 0.036788604s.
func seconds(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// parseDashboard parses the embedded template. It fails only if the
// embedded file is broken, which the tests catch.
func parseDashboard() (*template.Template, error) {
	t, err := template.New("dashboard.html").Funcs(dashboardFuncs).ParseFS(dashboardFS, "dashboard.html")
	if err != nil {
		return nil, fmt.Errorf("edge: parse dashboard: %w", err)
	}
	return t, nil
}

// partitionRanges writes sorted partition numbers compactly: "0-4, 7, 9-10".
// Unsorted input is written as given, run by run.
func partitionRanges(ps []int) string {
	if len(ps) == 0 {
		return "none"
	}
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(ps[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ps[j]))
		}
		i = j + 1
	}
	return b.String()
}

// humanBytes writes n with a binary unit: "512 B", "1.5 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + "KMGTPE"[exp:exp+1] + "iB"
}
