package modelcheck

import (
	"os"
	"testing"
)

func TestSample(t *testing.T) {
	if os.Getenv("SAMPLE") == "" {
		t.Skip()
	}
	sc := scenarios()[0]
	sc.depth = 14
	init := initial(&sc)
	seen := map[uint64]struct{}{init.hash(): {}}
	nodes := []node{{parent: -1}}
	frontier, ids := []state{init}, []int32{0}
	for d := 0; d < sc.depth; d++ {
		var next []state
		var nextIDs []int32
		for i := range frontier {
			for _, e := range frontier[i].events(&sc) {
				s := frontier[i]
				s.apply(&sc, e)
				h := s.hash()
				if _, ok := seen[h]; ok {
					continue
				}
				seen[h] = struct{}{}
				nodes = append(nodes, node{parent: ids[i], ev: e})
				next, nextIDs = append(next, s), append(nextIDs, int32(len(nodes)-1))
			}
		}
		frontier, ids = next, nextIDs
	}
	for _, k := range []int{0, len(ids) / 3, len(ids) / 2, len(ids) - 1} {
		t.Log(replay(&sc, nodes, ids[k]))
	}
}
