package client_test

import (
	"context"
	"testing"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/edge/internal/nodetest"
)

func TestSmoke(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "db", "v1", 4, nodetest.Numbered("v1", 100))
	kv := nodetest.StartKV(t, nodetest.NATSConfig(t))
	n := nodetest.StartNode(t, kv, root, nodetest.Options{})
	nc := nodetest.Connect(t, kv.ClientURL())
	cfg := client.DefaultConfig()
	cfg.Conn = nc
	cfg.ClusterName = nodetest.Cluster
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	<-c.Ready()
	res, err := c.Get(context.Background(), "db", []byte("key-7"))
	t.Logf("%+v %v", res, err)
	t.Logf("%+v", c.Map())
	rs, err := c.GetMany(context.Background(), "db", [][]byte{[]byte("key-1"), []byte("nope")})
	t.Logf("%+v %v", rs, err)
	hcfg := client.DefaultConfig()
	hcfg.URLs = []string{n.HTTPURL}
	hc, _ := client.New(hcfg)
	hc.Start()
	res, err = hc.Get(context.Background(), "db", []byte("key-7"))
	t.Logf("%+v %v", res, err)
	rs, err = hc.GetMany(context.Background(), "db", [][]byte{[]byte("key-1"), []byte("nope")})
	t.Logf("%+v %v", rs, err)
}
