package expand

// ImagedRows is how many representative rows' members were attached as
// images (followImages) rather than made.
func ImagedRows(x *Store) int64 { return x.imaged }
