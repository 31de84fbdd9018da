package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// chart is a stacked bar chart of deliveries by outcome per time bucket,
// drawn as inline SVG (no script, no external asset).
type chart struct {
	Title  string
	SVG    template.HTML
	Totals [3]int // succeeded, retrying, dead
}

var outcomeNames = [3]string{"succeeded", "retrying", "dead"}

// buildChart counts the times of each series (succeeded, retrying, dead)
// into n buckets of width step ending at now, and draws them. The SVG is
// built from numbers only: no user data reaches it.
func buildChart(title string, now time.Time, step time.Duration, n int, series [3][]time.Time) chart {
	start := now.Add(-time.Duration(n) * step)
	counts := make([][3]int, n)
	ch := chart{Title: title}
	for k, ts := range series {
		for _, t := range ts {
			if t.Before(start) || !t.Before(now) {
				continue
			}
			i := int(t.Sub(start) / step)
			if i >= 0 && i < n {
				counts[i][k]++
				ch.Totals[k]++
			}
		}
	}
	max := 1
	for _, c := range counts {
		if s := c[0] + c[1] + c[2]; s > max {
			max = s
		}
	}
	const w, h, left, bottom = 720.0, 160.0, 36.0, 18.0
	bw := (w - left) / float64(n)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" class="axis"/>`, left, h-bottom, w, h-bottom)
	fmt.Fprintf(&b, `<text x="%.0f" y="10" class="tick">%d</text><text x="%.0f" y="%.0f" class="tick">0</text>`, left-4, max, left-4, h-bottom)
	for i, c := range counts {
		y := h - bottom
		for k := 0; k < 3; k++ {
			if c[k] == 0 {
				continue
			}
			bh := float64(c[k]) / float64(max) * (h - bottom - 12)
			y -= bh
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" class="bar-%s"><title>%s: %d %s</title></rect>`,
				left+float64(i)*bw+0.5, y, maxf(bw-1, 0.5), bh, outcomeNames[k], start.Add(time.Duration(i)*step).UTC().Format("15:04"), c[k], outcomeNames[k])
		}
	}
	for k, i := range []int{0, n / 2, n} {
		anchor := [3]string{"start", "middle", "end"}[k]
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" class="tick-x" text-anchor="%s">%s</text>`, left+float64(i)*bw, h-4, anchor, start.Add(time.Duration(i)*step).UTC().Format("15:04"))
	}
	b.WriteString(`</svg>`)
	ch.SVG = template.HTML(b.String()) // numbers and fixed class names only
	return ch
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
