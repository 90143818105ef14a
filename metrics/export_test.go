package metrics

// The failure kinds and their classification, for the tests of package
// metrics_test.
const (
	KindLost            = kindLost
	KindTransient       = kindTransient
	KindNotWritable     = kindNotWritable
	KindDeployment      = kindDeployment
	KindInvalidRow      = kindInvalidRow
	KindInvalidArgument = kindInvalidArgument
	KindOther           = kindOther
)

var ErrorKind = errorKind
