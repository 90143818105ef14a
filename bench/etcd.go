package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// etcdSystem is etcd's concurrency.Election on an embedded single-member etcd that
// listens on 127.0.0.1 only, with its data in a temporary directory. Sessions have
// the lease duration as TTL (whole seconds); the client keeps them alive every TTL/3.
type etcdSystem struct {
	t     timing
	ttl   int
	dir   string
	srv   *embed.Etcd
	ep    string
	count counter
}

func newEtcdSystem(t timing) (*etcdSystem, error) {
	dir, err := os.MkdirTemp("", "casleader-bench-etcd-")
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	lc, _ := url.Parse("http://127.0.0.1:0")
	lp, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*lc}, []url.URL{*lc}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*lp}, []url.URL{*lp}
	cfg.InitialCluster = cfg.Name + "=" + lp.String()
	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	select {
	case <-srv.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		srv.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcd did not start")
	}
	ttl := int((t.Lease + time.Second - 1) / time.Second)
	return &etcdSystem{t: t, ttl: ttl, dir: dir, srv: srv, ep: srv.Clients[0].Addr().String()}, nil
}

func (s *etcdSystem) Name() string                 { return "etcd-election" }
func (s *etcdSystem) Statements() map[string]int64 { return s.count.snapshot() }

func (s *etcdSystem) Close() {
	s.srv.Close()
	os.RemoveAll(s.dir)
}

func (s *etcdSystem) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{s.ep},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				s.count.add(method, 1)
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				cs, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil {
					return nil, err
				}
				return countingStream{ClientStream: cs, count: &s.count, method: method}, nil
			}),
		},
	})
}

type countingStream struct {
	grpc.ClientStream
	count  *counter
	method string
}

func (c countingStream) SendMsg(m any) error {
	c.count.add(c.method, 1)
	return c.ClientStream.SendMsg(m)
}

func (s *etcdSystem) Start(ctx context.Context, key, id string) (candidate, error) {
	cli, err := s.client()
	if err != nil {
		return nil, err
	}
	lease, err := cli.Grant(ctx, int64(s.ttl))
	if err != nil {
		cli.Close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	c := &etcdCandidate{id: id, cli: cli, cancel: cancel, done: make(chan struct{})}
	// Our own keep-alive channel: the client shares one keep-alive stream per lease
	// and sends every reply to each channel, so this records the session's renewals.
	ka, err := cli.KeepAlive(rctx, lease.ID)
	if err != nil {
		cancel()
		cli.Close()
		return nil, err
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(s.ttl))
	if err != nil {
		cancel()
		cli.Close()
		return nil, err
	}
	c.el = concurrency.NewElection(sess, "/casleader-bench/"+key)
	c.sess = sess
	var wg sync.WaitGroup
	wg.Go(func() {
		for range ka {
			now := time.Now()
			if c.leader.Load() {
				c.marks.set(func(m *marks) { m.LastRenew = now })
			}
		}
	})
	wg.Go(func() {
		if err := c.el.Campaign(rctx, id); err == nil {
			now := time.Now()
			c.marks.set(func(m *marks) { m.Won, m.LastRenew = now, now })
			c.leader.Store(true)
		}
	})
	go func() { wg.Wait(); close(c.done) }()
	return c, nil
}

type etcdCandidate struct {
	id     string
	cli    *clientv3.Client
	sess   *concurrency.Session
	el     *concurrency.Election
	leader atomic.Bool
	marks  markBox
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (c *etcdCandidate) ID() string     { return c.id }
func (c *etcdCandidate) IsLeader() bool { return c.leader.Load() }
func (c *etcdCandidate) Marks() marks   { return c.marks.get() }

// Crash closes the client without revoking the session's lease: the lease expires
// after its TTL, as when the process is killed.
func (c *etcdCandidate) Crash() {
	c.once.Do(func() {
		c.leader.Store(false)
		c.cancel()
		c.cli.Close()
		<-c.done
	})
}

func (c *etcdCandidate) Resign(ctx context.Context) error {
	c.leader.Store(false)
	err := c.el.Resign(ctx)
	if err == nil {
		now := time.Now()
		c.marks.set(func(m *marks) { m.Released = now })
	}
	return err
}

func (c *etcdCandidate) Stop() {
	_ = c.sess.Close() // revokes the lease
	c.Crash()
}
