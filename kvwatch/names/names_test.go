package names

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"db": true, "my-db_2": true, "A9": true, strings.Repeat("x", MaxLen+1): true,
		"": false, "a.b": false, "a b": false, "../x": false, "*": false, ">": false, "é": false,
	} {
		if Valid(s) != want {
			t.Errorf("Valid(%q) = %v, want %v", s, !want, want)
		}
	}
}

func TestBuckets(t *testing.T) {
	tests := []struct {
		cluster, kind, want string
	}{
		{"spangle", Nodes, "spangle_spangle_nodes"},
		{"prod-eu", Partitions, "spangle_prod-eu_partitions"},
		{"a.b c/d", Versions, "spangle_a_b_c_d_versions"},
		{"ünï", Nodes, "spangle__n__nodes"},
		{"spangle", "*", "spangle_spangle_*"},
	}
	for _, tt := range tests {
		t.Run(tt.cluster, func(t *testing.T) {
			if got := KVBucket(tt.cluster, tt.kind); got != tt.want {
				t.Errorf("KVBucket(%q, %q) = %q, want %q", tt.cluster, tt.kind, got, tt.want)
			}
		})
	}
	b := KVBucket("c", Versions)
	if KVStream(b) != "KV_spangle_c_versions" || KVSubject(b, PinKey("db")) != "$KV.spangle_c_versions.db.pin" {
		t.Errorf("stream %q, subject %q", KVStream(b), KVSubject(b, PinKey("db")))
	}
	if ObjectStream("data") != "OBJ_data" || ObjectSubjects("data") != "$O.data.>" {
		t.Error("Object Store names")
	}
	if APIPrefix("") != "$JS.API" || APIPrefix("eu") != "$JS.eu.API" {
		t.Errorf("APIPrefix: %q %q", APIPrefix(""), APIPrefix("eu"))
	}
}

func TestSubjects(t *testing.T) {
	for got, want := range map[string]string{
		Prefix("c"):                     "spangle.c",
		GetSubject("c", "db"):           "spangle.c.get.db",
		MGetSubject("c", "db"):          "spangle.c.mget.db",
		PartPrefix("c", "db", "v1"):     "spangle.c.part.db.v1.",
		PartSubject("c", "db", "v1", 7): "spangle.c.part.db.v1.7",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestKeys(t *testing.T) {
	if k := PartitionKey("db", "v1", "n1"); k != "db.v1.n1" || !ValidKey(k) {
		t.Errorf("PartitionKey = %q", k)
	}
	if !strings.HasPrefix(PartitionKey("db", "v1", "n1"), PartitionPrefix("db", "v1")) {
		t.Error("PartitionPrefix is not a prefix of PartitionKey")
	}
	if NodeKey("n1") != "n1" || VersionKey("db") != "db" {
		t.Error("node and version keys are the names themselves")
	}
	if PinKey("db") != "db.pin" || !IsPinKey(PinKey("db")) || IsPinKey(VersionKey("db")) {
		t.Error("pin keys")
	}
	tests := []struct {
		key               string
		db, version, node string
		ok                bool
	}{
		{"db.v1.n1", "db", "v1", "n1", true},
		{"my-db.2024_01_01.node-7", "my-db", "2024_01_01", "node-7", true},
		{"db.v1", "", "", "", false},
		{"db.v1.n1.x", "", "", "", false},
		{"db..n1", "", "", "", false},
		{".v1.n1", "", "", "", false},
		{"db.v 1.n1", "", "", "", false},
		{"db.v1.*", "", "", "", false},
		{"", "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			db, version, node, ok := ParsePartitionKey(tt.key)
			if ok != tt.ok || db != tt.db || version != tt.version || node != tt.node {
				t.Errorf("ParsePartitionKey(%q) = %q %q %q %v", tt.key, db, version, node, ok)
			}
		})
	}
	for key, want := range map[string]bool{
		"n1": true, "a.b": true, "a-b_C9": true,
		"": false, "a.": false, ".a": false, "a..b": false, "a b": false, "a>": false, "*": false, "é": false,
	} {
		if ValidKey(key) != want {
			t.Errorf("ValidKey(%q) = %v, want %v", key, !want, want)
		}
	}
}

func FuzzParsePartitionKey(f *testing.F) {
	for _, s := range []string{"db.v1.n1", "a.b", "a.b.c.d", "..", "x.y.z", "db.v 1.n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		db, version, node, ok := ParsePartitionKey(key)
		if !ok {
			return
		}
		if !Valid(db) || !Valid(version) || !Valid(node) {
			t.Fatalf("accepted invalid names %q %q %q", db, version, node)
		}
		if PartitionKey(db, version, node) != key || !ValidKey(key) {
			t.Fatalf("round trip of %q gives %q", key, PartitionKey(db, version, node))
		}
	})
}
