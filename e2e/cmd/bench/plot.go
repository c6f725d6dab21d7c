package main

import (
	"fmt"
	"html"
	"os"
	"strings"
)

// contenderColor is each contender's bar colour.
var contenderColor = map[string]string{limitName: "#9e9e9e", sidemirrorName: "#1f77b4", mm2Name: "#ff7f0e"}

// throughputSVG draws records/s per workload per contender as horizontal
// bars (one group per workload), with each bar's value and its ratio to
// the limit, as an SVG image.
func throughputSVG(r *report) string {
	const (
		left, width, barH, gap, groupGap, top = 330, 420, 18, 4, 26, 40
	)
	var peak float64
	bars := 0
	for _, w := range r.Workloads {
		for _, m := range w.Results {
			peak = max(peak, m.RecordsPerSecond)
			bars++
		}
	}
	if peak == 0 {
		peak = 1
	}
	height := top + bars*(barH+gap) + len(r.Workloads)*groupGap + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", left+width+130, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">records/s per workload (%s records each, %s)</text>`+"\n",
		thousands(int64(r.Options.Records)), html.EscapeString(r.Date))
	y := top
	for _, w := range r.Workloads {
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+12, html.EscapeString(w.Workload.Description))
		y += groupGap - 8
		for _, m := range w.Results {
			bw := int(float64(width) * m.RecordsPerSecond / peak)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH-5, html.EscapeString(contenderTitle[m.Contender]))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", left, y, max(bw, 1), barH, contenderColor[m.Contender])
			label := thousands(int64(m.RecordsPerSecond + 0.5))
			if m.VsLimit > 0 && m.Contender != limitName {
				label += fmt.Sprintf(" (%.2f of the limit)", m.VsLimit)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+max(bw, 1)+6, y+barH-5, label)
			y += barH + gap
		}
		y += 8
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func writePlot(path string, r *report) error {
	return os.WriteFile(path, []byte(throughputSVG(r)), 0o644)
}
