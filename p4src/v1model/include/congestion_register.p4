// Each (port, queue)'s congestion level, written by egress (CongestionMonitor) as packets leave the
// queue and read by ingress (SelectiveDrop) for the queue a packet is headed for. Ingress reading
// what egress wrote is a BMv2 capability: Tofino drops in egress instead (docs/dataplane.md).
#ifndef __MLFC_CONGESTION_REGISTER__
#define __MLFC_CONGESTION_REGISTER__

register<congestion_level_t>(CONGESTION_SLOTS) congestion_level;

bit<32> congestion_slot(in PortId_t port, in priority_t priority) {
    return ((bit<32>) port) * NUM_QUEUES + (bit<32>) priority;
}

#endif
