package catalog

import (
	"sort"
	"strings"
)

// Suggest returns the names of known closest to name (Levenshtein
// distance at most 2, or a third of name's length when longer): up to
// three, all at the smallest distance found, for "did you mean …?" answers.
func Suggest(name string, known []string) []string {
	type cand struct {
		name string
		d    int
	}
	limit := max(2, len(name)/3)
	var cs []cand
	for _, k := range known {
		if d := distance(strings.ToLower(name), strings.ToLower(k)); d <= limit {
			cs = append(cs, cand{k, d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	out := []string{}
	for i := 0; i < len(cs) && i < 3 && cs[i].d == cs[0].d; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// distance is the Levenshtein distance, with a transposition of adjacent
// characters counting as one edit (optimal string alignment): "piad" is one
// edit from "paid".
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
