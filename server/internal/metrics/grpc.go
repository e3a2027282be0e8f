package metrics

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// NewGRPCServerMetrics builds the go-grpc-middleware server metrics
// (grpc_server_started_total, grpc_server_handled_total, grpc_server_msg_*_total
// and the grpc_server_handling_seconds histogram) and registers them on reg.
//
// Wire its UnaryServerInterceptor/StreamServerInterceptor into the chain and
// call InitializeMetrics(grpcServer) after registering services, so every
// method shows from the first scrape.
func NewGRPCServerMetrics(reg prometheus.Registerer) *grpcprom.ServerMetrics {
	m := grpcprom.NewServerMetrics(
		grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets(decisionBuckets),
		),
	)
	reg.MustRegister(m)
	return m
}
