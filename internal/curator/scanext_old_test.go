package curator

// liveExtentsOf lists an egroup's live extents as (offset, ID, length).
func liveExtentsOf(res *scanResult, id uint64) [][3]int64 {
	var out [][3]int64
	for _, x := range res.liveByEgroup[id] {
		out = append(out, [3]int64{x.rec.Off, int64(x.id), x.rec.Len})
	}
	return out
}
