// mlfc on ns-3: the per-packet parts of the simulation, JIT-compiled by cppyy at run time.
//
// Python (mlfc.sim) owns every parameter: the switch tables are the controller's compiled entries
// (mlfc.controller.compile over mlfc/policy), MLTCP's slope/intercept come from MltcpParams, the
// progress quantisation from mlfc.wire. This file only evaluates them per packet, where Python
// would be far too slow. Nothing here holds a policy constant of its own.
#pragma once

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

namespace mlfcsim
{
using namespace ns3;

// ---- the shim's classification fields, carried as an ns-3 packet tag --------------------------

class MlfcTag : public Tag
{
  public:
    uint16_t job{0};
    uint32_t iteration{0};
    uint8_t importance{0};
    uint8_t progress{0};

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("mlfcsim::MlfcTag").SetParent<Tag>().AddConstructor<MlfcTag>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override { return GetTypeId(); }

    uint32_t GetSerializedSize() const override { return 8; }

    void Serialize(TagBuffer i) const override
    {
        i.WriteU16(job);
        i.WriteU32(iteration);
        i.WriteU8(importance);
        i.WriteU8(progress);
    }

    void Deserialize(TagBuffer i) override
    {
        job = i.ReadU16();
        iteration = i.ReadU32();
        importance = i.ReadU8();
        progress = i.ReadU8();
    }

    void Print(std::ostream& os) const override
    {
        os << "job=" << job << " it=" << iteration << " imp=" << int(importance) << " prog=" << int(progress);
    }
};

// ---- per-connection progress: bytes sent in this iteration (MLTCP's bytes_ratio, the shim's progress)

struct FlowProgress
{
    uint16_t job{0};
    uint32_t iteration{0};
    uint64_t bytesPerIteration{0}; // declared by the training job, like SenderConfig's start_iteration(n)
    uint64_t iterationBase{0};     // stream offset of the iteration's first byte
    uint64_t highSent{0};          // stream offset past the highest byte ever sent
    bool haveFirstSeq{false};
    SequenceNumber32 firstSeq{0};
    int progressBuckets{16};              // mlfc.wire.PROGRESS_BUCKETS, set from Python
    std::vector<uint8_t> importance;      // class per chunk of the iteration, cycled; empty: all 0
    uint32_t chunkBytes{1400};            // bytes per importance chunk

    uint64_t SentThisIteration() const { return highSent > iterationBase ? highSent - iterationBase : 0; }

    // mlfc.policy.mltcp.bytes_ratio
    double Ratio() const
    {
        if (bytesPerIteration == 0)
            return 0.0;
        double r = double(SentThisIteration()) / double(bytesPerIteration);
        return std::max(0.0, std::min(1.0, r));
    }

    // mlfc.wire.progress_bucket of the bytes sent before ``offset``
    uint8_t BucketAt(uint64_t offset) const
    {
        if (bytesPerIteration == 0 || offset < iterationBase)
            return 0;
        double r = double(offset - iterationBase) / double(bytesPerIteration);
        int b = int(r * progressBuckets);
        return uint8_t(std::max(0, std::min(progressBuckets - 1, b)));
    }

    uint8_t ImportanceAt(uint64_t offset) const
    {
        if (importance.empty() || offset < iterationBase)
            return 0;
        uint64_t chunk = (offset - iterationBase) / chunkBytes;
        return importance[chunk % importance.size()];
    }
};

// ---- MLTCP: F(bytes_ratio) = slope * ratio + intercept scales the congestion-avoidance growth ----

struct FSample
{
    uint64_t sent;
    uint64_t perIteration;
    double factor;
};

struct MltcpState
{
    bool enabled{false};
    double slope{0.0};
    double intercept{1.0};
    double knee{-1.0}; // < 0: F is the line; else the step at this bytes_ratio
    bool restartAfterIdle{true};
    uint32_t initialWindow{10};
    FlowProgress* progress{nullptr};
    Ptr<TcpSocketState> tcb;
    double carry{0.0};
    bool recordSamples{false};
    std::vector<FSample> samples;
    // Congestion reactions (issue 45): window reductions, each asking the algorithm for a new ssthresh (CWR
    // on an ECN echo, fast recovery, timeout); at most one a window, what a congestion signal does to it.
    uint64_t reactions{0};

    double Factor() const
    {
        if (!enabled)
            return 1.0;
        double r = progress ? progress->Ratio() : 0.0;
        if (knee >= 0.0) // the step shape (mlfc.policy.mltcp): g(r) = 1 from r >= knee
            return slope * (r >= knee ? 1.0 : 0.0) + intercept;
        return slope * r + intercept;
    }

    // Grow by F times what the unmodified algorithm just added in congestion avoidance.
    void Scale(Ptr<TcpSocketState> t, uint32_t before, bool wasCongestionAvoidance)
    {
        tcb = t;
        if (!enabled || !wasCongestionAvoidance)
            return;
        double f = Factor();
        if (recordSamples && progress)
            samples.push_back({progress->SentThisIteration(), progress->bytesPerIteration, f});
        double delta = double(t->m_cWnd.Get()) - double(before);
        if (delta <= 0)
            return;
        double grown = f * delta + carry;
        double whole = std::floor(grown);
        carry = grown - whole;
        t->m_cWnd = uint32_t(before + whole);
    }

    // RFC 5681 section 4.1 (Linux's tcp_slow_start_after_idle), as mlfc's own transport does it
    // after a compute phase: ssthresh keeps 3/4 of the window, cwnd restarts from min(IW, cwnd).
    bool RestartAfterIdle()
    {
        if (!restartAfterIdle || !tcb)
            return false;
        uint32_t cwnd = tcb->m_cWnd.Get();
        uint32_t iw = initialWindow * tcb->m_segmentSize;
        tcb->m_ssThresh = std::max(tcb->m_ssThresh.Get(), uint32_t(0.75 * cwnd));
        uint32_t next = std::min(cwnd, iw);
        tcb->m_cWnd = next;
        tcb->m_cWndInfl = next;
        carry = 0.0;
        return true;
    }
};

class TcpMlfcReno : public TcpNewReno
{
  public:
    MltcpState mltcp;

    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("mlfcsim::TcpMlfcReno").SetParent<TcpNewReno>().AddConstructor<TcpMlfcReno>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override { return GetTypeId(); }

    TcpMlfcReno() = default;

    TcpMlfcReno(const TcpMlfcReno& o)
        : TcpNewReno(o),
          mltcp(o.mltcp)
    {
    }

    std::string GetName() const override { return mltcp.enabled ? "MltcpReno" : "Reno"; }

    void Init(Ptr<TcpSocketState> tcb) override
    {
        mltcp.tcb = tcb;
        TcpNewReno::Init(tcb);
    }

    void IncreaseWindow(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override
    {
        uint32_t before = tcb->m_cWnd.Get();
        bool ca = tcb->m_cWnd >= tcb->m_ssThresh;
        TcpNewReno::IncreaseWindow(tcb, segmentsAcked);
        mltcp.Scale(tcb, before, ca);
    }

    // Every window reduction (ECN echo, fast retransmit, timeout) asks for the new ssthresh: one reaction.
    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override
    {
        mltcp.reactions++;
        return TcpNewReno::GetSsThresh(tcb, bytesInFlight);
    }

    Ptr<TcpCongestionOps> Fork() override { return CopyObject<TcpMlfcReno>(this); }
};

class TcpMlfcCubic : public TcpCubic
{
  public:
    MltcpState mltcp;

    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("mlfcsim::TcpMlfcCubic").SetParent<TcpCubic>().AddConstructor<TcpMlfcCubic>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override { return GetTypeId(); }

    TcpMlfcCubic() = default;

    TcpMlfcCubic(const TcpMlfcCubic& o)
        : TcpCubic(o),
          mltcp(o.mltcp)
    {
    }

    std::string GetName() const override { return mltcp.enabled ? "MltcpCubic" : "Cubic"; }

    void Init(Ptr<TcpSocketState> tcb) override
    {
        mltcp.tcb = tcb;
        TcpCubic::Init(tcb);
    }

    void IncreaseWindow(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override
    {
        uint32_t before = tcb->m_cWnd.Get();
        bool ca = tcb->m_cWnd >= tcb->m_ssThresh;
        TcpCubic::IncreaseWindow(tcb, segmentsAcked);
        mltcp.Scale(tcb, before, ca);
    }

    // Every window reduction (ECN echo, fast retransmit, timeout) asks for the new ssthresh: one reaction.
    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override
    {
        mltcp.reactions++;
        return TcpCubic::GetSsThresh(tcb, bytesInFlight);
    }

    // After idle the cubic epoch must not count the idle time: ns-3's CUBIC keeps its epoch private,
    // so its own reset (what it does on a loss) starts a fresh epoch at the restarted window.
    bool RestartAfterIdle()
    {
        if (!mltcp.RestartAfterIdle())
            return false;
        TcpCubic::CongestionStateSet(mltcp.tcb, TcpSocketState::CA_LOSS);
        TcpCubic::CongestionStateSet(mltcp.tcb, TcpSocketState::CA_OPEN);
        return true;
    }

    Ptr<TcpCongestionOps> Fork() override { return CopyObject<TcpMlfcCubic>(this); }
};

// ---- the switch: mlfc.p4's queueing, ECN and selective drop from the controller's entries -------

struct PriorityEntry // MlfcIngress.queueing.job_priority
{
    uint32_t jobValue, jobMask;
    uint32_t iterLo, iterHi;
    uint32_t progLo, progHi;
    int32_t entryPriority;
    uint8_t cls;
};

struct LevelEntry // MlfcEgress.congestion.congestion_levels
{
    uint32_t lo, hi;
    uint8_t level;
};

struct EcnEntry // MlfcEgress.ecn.ecn_profile
{
    uint32_t portValue, portMask;
    uint32_t prioValue, prioMask;
    uint32_t lo, hi;
    int32_t entryPriority;
    uint32_t threshold; // mark when a 16-bit random number is below it; >= 65536: always; 0: never
};

// One switch's tables. Entries are kept sorted by entry priority (higher first): first match wins.
struct SwitchTables
{
    std::vector<PriorityEntry> priority;
    uint8_t defaultClass{1};  // the table's default action set_priority(1)
    uint8_t controlClass{7};  // ACK/CNP
    std::vector<LevelEntry> levels;
    std::vector<uint8_t> minImportance{0, 0, 0, 0}; // drop_threshold per level; default action 0
    uint8_t protectedImportance{8};
    std::vector<EcnEntry> ecn;
    uint32_t randomRange{65536};

    void ClearPriority() { priority.clear(); }

    void AddPriority(uint32_t jv, uint32_t jm, uint32_t il, uint32_t ih, uint32_t pl, uint32_t ph, int32_t ep,
                     uint8_t cls)
    {
        priority.push_back({jv & jm, jm, il, ih, pl, ph, ep, cls});
        std::stable_sort(priority.begin(), priority.end(),
                         [](const PriorityEntry& a, const PriorityEntry& b) { return a.entryPriority > b.entryPriority; });
    }

    void AddLevel(uint32_t lo, uint32_t hi, uint8_t level) { levels.push_back({lo, hi, level}); }

    void SetMinImportance(uint8_t level, uint8_t importance)
    {
        if (level >= minImportance.size())
            minImportance.resize(level + 1, 0);
        minImportance[level] = importance;
    }

    void ClearEcn() { ecn.clear(); }

    void AddEcn(uint32_t pv, uint32_t pm, uint32_t qv, uint32_t qm, uint32_t lo, uint32_t hi, int32_t ep,
                uint32_t threshold)
    {
        ecn.push_back({pv & pm, pm, qv & qm, qm, lo, hi, ep, threshold});
        std::stable_sort(ecn.begin(), ecn.end(),
                         [](const EcnEntry& a, const EcnEntry& b) { return a.entryPriority > b.entryPriority; });
    }

    uint8_t ClassOf(uint32_t job, uint32_t iteration, uint32_t progress) const
    {
        for (const auto& e : priority)
        {
            if ((job & e.jobMask) == e.jobValue && iteration >= e.iterLo && iteration <= e.iterHi &&
                progress >= e.progLo && progress <= e.progHi)
                return std::min<uint8_t>(e.cls, 6); // the program lowers a class-7 request to 6
        }
        return defaultClass;
    }

    uint8_t LevelOf(uint32_t depth) const
    {
        for (const auto& e : levels)
            if (depth >= e.lo && depth <= e.hi)
                return e.level;
        return 0;
    }

    uint32_t EcnThreshold(uint32_t port, uint32_t cls, uint32_t depth) const
    {
        for (const auto& e : ecn)
            if ((port & e.portMask) == e.portValue && (cls & e.prioMask) == e.prioValue && depth >= e.lo &&
                depth <= e.hi)
                return e.threshold;
        return 0;
    }
};

struct JobCounters
{
    uint64_t packets{0};
    uint64_t bytes{0};
    uint64_t ecnMarks{0};
    uint64_t selectiveDrops{0};
    uint64_t tailDrops{0};
};

// Eight strictly-prioritised FIFOs (7 served first) sharing the port's rate, like a hardware switch
// (and mlfc's reference switch); each FIFO holds at most ``limit`` packets (BMv2: per queue).
class MlfcQueueDisc : public QueueDisc
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("mlfcsim::MlfcQueueDisc").SetParent<QueueDisc>().AddConstructor<MlfcQueueDisc>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override { return GetTypeId(); }

    MlfcQueueDisc()
        : QueueDisc(QueueDiscSizePolicy::NO_LIMITS)
    {
    }

    SwitchTables* tables{nullptr};
    uint32_t port{0};
    uint32_t limit{64};
    uint8_t level[8]{0, 0, 0, 0, 0, 0, 0, 0};
    uint32_t maxDepth{0};
    uint64_t classPackets[8]{0, 0, 0, 0, 0, 0, 0, 0};
    std::unordered_map<uint32_t, JobCounters> jobs;
    std::mt19937 rng{1};

    void Seed(uint32_t s) { rng.seed(s); }

    uint32_t Depth(uint32_t cls) const { return GetInternalQueue(cls)->GetNPackets(); }

  protected:
    bool DoEnqueue(Ptr<QueueDiscItem> item) override
    {
        Ptr<Packet> p = item->GetPacket();
        MlfcTag tag;
        bool tagged = p->PeekPacketTag(tag);
        bool data = p->GetSize() > TcpHeaderLength(p);
        uint8_t cls;
        uint32_t job = tagged ? tag.job : 0;
        if (!data)
            cls = tables->controlClass; // a pure ACK: the transport's ACK/CNP class
        else if (tagged)
            cls = tables->ClassOf(tag.job, tag.iteration, tag.progress);
        else
            cls = tables->ClassOf(0, 0, 0);
        JobCounters& jc = jobs[job];
        jc.packets++;
        jc.bytes += item->GetSize();
        // Selective drop (ingress): tagged DATA below the minimum importance of its queue's level.
        if (tagged && data && tag.importance < tables->protectedImportance)
        {
            uint8_t lv = level[cls];
            uint8_t need = lv < tables->minImportance.size() ? tables->minImportance[lv] : 0;
            if (tag.importance < need)
            {
                jc.selectiveDrops++;
                DropBeforeEnqueue(item, "selective drop");
                return false;
            }
        }
        uint32_t depth = Depth(cls);
        if (depth >= limit)
        {
            jc.tailDrops++;
            DropBeforeEnqueue(item, "queue full");
            return false;
        }
        // ECN (egress, on the enqueue depth; ECT packets only — Mark() refuses the others).
        if (data)
        {
            uint32_t thr = tables->EcnThreshold(port, cls, depth);
            if (thr >= tables->randomRange || (thr > 0 && (rng() & 0xFFFF) < thr))
            {
                if (item->Mark())
                    jc.ecnMarks++;
            }
        }
        classPackets[cls]++;
        GetInternalQueue(cls)->Enqueue(item);
        maxDepth = std::max(maxDepth, depth + 1);
        return true;
    }

    Ptr<QueueDiscItem> DoDequeue() override
    {
        for (int c = 7; c >= 0; --c)
        {
            Ptr<QueueDiscItem> item = GetInternalQueue(c)->Dequeue();
            if (item)
            {
                level[c] = tables->LevelOf(Depth(c)); // the dequeue depth sets the queue's level
                return item;
            }
        }
        return nullptr;
    }

    Ptr<const QueueDiscItem> DoPeek() override
    {
        for (int c = 7; c >= 0; --c)
        {
            Ptr<const QueueDiscItem> item = GetInternalQueue(c)->Peek();
            if (item)
                return item;
        }
        return nullptr;
    }

    bool CheckConfig() override
    {
        if (!tables)
            return false;
        if (GetNInternalQueues() == 0)
        {
            for (int c = 0; c < 8; ++c)
            {
                // The class limit is enforced in DoEnqueue (so the drop is counted per job); the
                // internal FIFO itself never refuses a packet.
                AddInternalQueue(CreateObjectWithAttributes<DropTailQueue<QueueDiscItem>>(
                    "MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, 1u << 30))));
            }
        }
        return GetNInternalQueues() == 8 && GetNQueueDiscClasses() == 0 && GetNPacketFilters() == 0;
    }

    void InitializeParams() override {}

  private:
    static uint32_t TcpHeaderLength(Ptr<const Packet> p)
    {
        if (p->GetSize() < 20)
            return p->GetSize();
        uint8_t b[13];
        p->CopyData(b, 13);
        return uint32_t(b[12] >> 4) * 4; // data offset
    }
};

// ---- ECMP routing: per-flow hash over equal-cost next hops, tables filled from Python ------------

class MlfcRouting : public Ipv4RoutingProtocol
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid =
            TypeId("mlfcsim::MlfcRouting").SetParent<Ipv4RoutingProtocol>().AddConstructor<MlfcRouting>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override { return GetTypeId(); }

    struct Hop
    {
        uint32_t iface;
        Ipv4Address gateway;
    };

    uint32_t seed{0};
    uint64_t forwarded{0};

    void AddRoute(uint32_t dst, uint32_t iface, uint32_t gateway)
    {
        m_routes[dst].push_back({iface, Ipv4Address(gateway)});
    }

    void ClearRoutes() { m_routes.clear(); }

    uint32_t NumRoutes() const { return m_routes.size(); }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p, const Ipv4Header& header, Ptr<NetDevice> oif,
                               Socket::SocketErrno& sockerr) override
    {
        const Hop* hop = Pick(header, p, header.GetProtocol());
        if (!hop)
        {
            sockerr = Socket::ERROR_NOROUTETOHOST;
            return nullptr;
        }
        sockerr = Socket::ERROR_NOTERROR;
        return MakeRoute(header.GetDestination(), *hop);
    }

    bool RouteInput(Ptr<const Packet> p, const Ipv4Header& header, Ptr<const NetDevice> idev,
                    const UnicastForwardCallback& ucb, const MulticastForwardCallback& mcb,
                    const LocalDeliverCallback& lcb, const ErrorCallback& ecb) override
    {
        uint32_t iif = m_ipv4->GetInterfaceForDevice(idev);
        if (m_ipv4->IsDestinationAddress(header.GetDestination(), iif))
        {
            if (!lcb.IsNull())
            {
                lcb(p, header, iif);
                return true;
            }
            return false;
        }
        const Hop* hop = Pick(header, p, header.GetProtocol());
        if (!hop)
        {
            ecb(p, header, Socket::ERROR_NOROUTETOHOST);
            return true;
        }
        forwarded++;
        ucb(MakeRoute(header.GetDestination(), *hop), p, header);
        return true;
    }

    void NotifyInterfaceUp(uint32_t) override {}

    void NotifyInterfaceDown(uint32_t) override {}

    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override {}

    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override {}

    void SetIpv4(Ptr<Ipv4> ipv4) override { m_ipv4 = ipv4; }

    void PrintRoutingTable(Ptr<OutputStreamWrapper> stream, Time::Unit) const override
    {
        *stream->GetStream() << m_routes.size() << " host routes\n";
    }

  private:
    Ptr<Ipv4> m_ipv4;
    std::unordered_map<uint32_t, std::vector<Hop>> m_routes;

    const Hop* Pick(const Ipv4Header& h, Ptr<const Packet> p, uint8_t proto) const
    {
        auto it = m_routes.find(h.GetDestination().Get());
        if (it == m_routes.end() || it->second.empty())
            return nullptr;
        const auto& hops = it->second;
        if (hops.size() == 1)
            return &hops[0];
        uint32_t ports = 0;
        if (p && p->GetSize() >= 4 && (proto == 6 || proto == 17))
        {
            uint8_t b[4];
            p->CopyData(b, 4);
            ports = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
        }
        // Symmetric in neither direction on purpose: each direction of a flow hashes on its own.
        uint64_t x = (uint64_t(h.GetSource().Get()) << 32) ^ h.GetDestination().Get();
        x ^= (uint64_t(ports) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(proto) << 56) ^ (uint64_t(seed) << 17);
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ull;
        x ^= x >> 33;
        return &hops[x % hops.size()];
    }

    Ptr<Ipv4Route> MakeRoute(Ipv4Address dst, const Hop& hop) const
    {
        Ptr<Ipv4Route> r = Create<Ipv4Route>();
        r->SetDestination(dst);
        r->SetGateway(hop.gateway);
        r->SetOutputDevice(m_ipv4->GetNetDevice(hop.iface));
        r->SetSource(m_ipv4->GetAddress(hop.iface, 0).GetLocal());
        return r;
    }
};

class MlfcRoutingHelper : public Ipv4RoutingHelper
{
  public:
    MlfcRoutingHelper* Copy() const override { return new MlfcRoutingHelper(*this); }

    Ptr<Ipv4RoutingProtocol> Create(Ptr<Node> node) const override { return CreateObject<MlfcRouting>(); }
};

// ---- connections: a persistent TCP connection carrying a sequence of messages -------------------

class Connection
{
  public:
    Ptr<Node> src, dst;
    Ipv4Address dstAddr;
    uint16_t port{0};
    Ptr<TcpSocketBase> tx;
    Ptr<Socket> listener;
    Ptr<Socket> rx;
    Ptr<TcpMlfcReno> reno;
    Ptr<TcpMlfcCubic> cubic;
    FlowProgress progress;
    uint64_t written{0};    // bytes handed to the socket
    uint64_t queued{0};     // bytes of messages accepted by Send
    uint64_t received{0};   // bytes the receiver has read
    uint64_t writeChunk{65536};
    uint64_t restarts{0};
    std::deque<std::pair<uint64_t, std::function<void()>>> pending; // (stream end, on delivered)

    MltcpState& Mltcp() { return reno ? reno->mltcp : cubic->mltcp; }

    // A new iteration of ``bytes`` on this connection: MLTCP's bytes_ratio restarts at 0, the
    // window restarts after the idle compute phase.
    void BeginIteration(uint32_t iteration, uint64_t bytes)
    {
        progress.iteration = iteration;
        progress.bytesPerIteration = bytes;
        progress.iterationBase = queued;
        bool restarted = reno ? reno->mltcp.RestartAfterIdle() : cubic->RestartAfterIdle();
        if (restarted)
            restarts++;
    }

    void Send(uint64_t bytes, std::function<void()> done)
    {
        queued += bytes;
        pending.emplace_back(queued, std::move(done));
        Pump();
    }

    void Pump()
    {
        while (written < queued)
        {
            uint32_t room = tx->GetTxAvailable();
            if (room == 0)
                return;
            uint64_t n = std::min<uint64_t>({queued - written, uint64_t(room), writeChunk});
            int sent = tx->Send(Create<Packet>(uint32_t(n)), 0);
            if (sent <= 0)
                return;
            written += uint64_t(sent);
        }
    }

    void OnSendSpace(Ptr<Socket>, uint32_t) { Pump(); }

    void Connect() { tx->Connect(InetSocketAddress(dstAddr, port)); }

    void OnTx(Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase>)
    {
        if (p->GetSize() == 0)
            return;
        if (!progress.haveFirstSeq)
        {
            progress.haveFirstSeq = true;
            progress.firstSeq = h.GetSequenceNumber();
        }
        uint64_t offset = uint64_t(uint32_t(h.GetSequenceNumber() - progress.firstSeq));
        uint64_t end = offset + p->GetSize();
        if (end > progress.highSent)
            progress.highSent = end;
        MlfcTag tag;
        tag.job = progress.job;
        tag.iteration = progress.iteration;
        tag.importance = progress.ImportanceAt(offset);
        tag.progress = progress.BucketAt(offset);
        p->AddPacketTag(tag);
    }

    void OnAccept(Ptr<Socket> s, const Address&)
    {
        rx = s;
        rx->SetRecvCallback(MakeCallback(&Connection::OnRecv, this));
    }

    void OnRecv(Ptr<Socket> s)
    {
        Ptr<Packet> p;
        while ((p = s->Recv()))
            received += p->GetSize();
        while (!pending.empty() && received >= pending.front().first)
        {
            auto done = std::move(pending.front().second);
            pending.pop_front();
            if (done)
                done();
        }
    }
};

// ---- training jobs ---------------------------------------------------------------------------

struct IterationRecord
{
    uint32_t job;
    uint32_t worker;
    uint32_t iteration;
    double start, commStart, pushEnd, commEnd, end;
    uint64_t bytes;
};

struct Recorder
{
    std::vector<IterationRecord> records;
    uint64_t drained{0};
};

class TrainingJob
{
  public:
    uint32_t id{0};
    bool ring{false};
    uint32_t iterations{10};
    uint64_t pushBytes{0}; // PS: per worker; ring: the whole gradient
    uint64_t pullBytes{0};
    double computeS{0.1};
    double jitter{0.0};        // relative std-dev of the compute time (normal, clipped at +-3 sigma)
    double straggle{1.0};      // compute multiplier of worker 0 from iteration straggleFrom
    uint32_t straggleFrom{0};
    double startAt{0.0};
    Recorder* recorder{nullptr};
    std::mt19937_64 rng{1};

    // PS: push[w] worker w -> PS, pull[w] PS -> worker w. Ring: push[w] worker w -> w+1.
    std::vector<Connection*> push, pull;
    uint32_t done{0};

    void Seed(uint64_t s) { rng.seed(s); }

    void Start()
    {
        uint32_t n = Workers();
        m_it.assign(n, 0);
        m_rec.assign(n, IterationRecord{});
        m_pushed = 0;
        m_sent.assign(n, 0);
        m_recv.assign(n, 0);
        m_computed.assign(n, false);
        for (uint32_t w = 0; w < n; ++w)
            Simulator::Schedule(Seconds(startAt), &TrainingJob::StartIteration, this, w);
    }

    uint32_t Workers() const { return push.size(); }

    bool Finished() const { return done == Workers(); }

  private:
    std::vector<uint32_t> m_it;
    std::vector<IterationRecord> m_rec;
    uint32_t m_pushed{0};
    std::vector<uint64_t> m_sent, m_recv; // ring: messages sent / received per worker (all iterations)
    std::vector<bool> m_computed;

    double Now() const { return Simulator::Now().GetSeconds(); }

    uint32_t Steps() const { return 2 * (Workers() - 1); }

    uint64_t RingChunk() const { return std::max<uint64_t>(1, pushBytes / Workers()); }

    double ComputeTime(uint32_t w, uint32_t it)
    {
        double t = computeS;
        if (jitter > 0)
        {
            std::normal_distribution<double> d(0.0, jitter);
            double z = std::max(-3 * jitter, std::min(3 * jitter, d(rng)));
            t *= 1.0 + z;
        }
        if (w == 0 && it >= straggleFrom)
            t *= straggle;
        return std::max(0.0, t);
    }

    void StartIteration(uint32_t w)
    {
        IterationRecord& r = m_rec[w];
        r = IterationRecord{id, w, m_it[w], Now(), 0, -1, 0, 0, 0};
        Simulator::Schedule(Seconds(ComputeTime(w, m_it[w])), &TrainingJob::ComputeDone, this, w);
    }

    void ComputeDone(uint32_t w)
    {
        m_rec[w].commStart = Now();
        if (!ring)
        {
            m_rec[w].bytes = pushBytes;
            push[w]->BeginIteration(m_it[w], pushBytes);
            push[w]->Send(pushBytes, [this, w]() { PushDelivered(w); });
            return;
        }
        m_rec[w].bytes = RingChunk() * Steps();
        push[w]->BeginIteration(m_it[w], RingChunk() * Steps());
        m_computed[w] = true;
        RingAdvance(w);
    }

    // ---- parameter server
    void PushDelivered(uint32_t w)
    {
        m_rec[w].pushEnd = Now();
        if (++m_pushed < Workers())
            return;
        m_pushed = 0;
        for (uint32_t k = 0; k < Workers(); ++k)
        {
            pull[k]->BeginIteration(m_it[k], pullBytes);
            pull[k]->Send(pullBytes, [this, k]() { IterationDone(k); });
        }
    }

    // ---- ring all-reduce: step s of an iteration goes out once step s-1 came in from the predecessor
    void RingAdvance(uint32_t w)
    {
        uint32_t steps = Steps();
        uint64_t first = uint64_t(m_it[w]) * steps;
        while (m_computed[w] && m_sent[w] < first + steps && (m_sent[w] == first || m_recv[w] >= m_sent[w]))
        {
            uint32_t next = (w + 1) % Workers();
            m_sent[w]++;
            push[w]->Send(RingChunk(), [this, next]() { RingReceived(next); });
        }
        if (m_computed[w] && m_sent[w] == first + steps && m_recv[w] >= first + steps)
        {
            m_computed[w] = false;
            IterationDone(w);
        }
    }

    void RingReceived(uint32_t w)
    {
        m_recv[w]++;
        uint64_t first = uint64_t(m_it[w]) * Steps();
        if (m_recv[w] == first + Steps() / 2)
            m_rec[w].pushEnd = Now(); // end of reduce-scatter (informational)
        RingAdvance(w);
    }

    void IterationDone(uint32_t w)
    {
        IterationRecord& r = m_rec[w];
        r.commEnd = r.end = Now();
        if (ring)
            r.pushEnd = -1; // both halves use the same link direction: compare whole phases
        recorder->records.push_back(r);
        if (++m_it[w] < iterations)
            StartIteration(w);
        else
            done++;
    }
};

// ---- construction helpers (called from Python once per object) ---------------------------------

inline Ptr<Socket> ListenTcp(Ptr<Node> node, uint16_t port)
{
    Ptr<Socket> s = Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
    s->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
    s->Listen();
    return s;
}

// Open a connection now (handshake at the current simulation time); cc is "reno" or "cubic".
inline void OpenConnection(Connection* c, const std::string& cc, bool mltcp, double slope, double intercept,
                           bool restartAfterIdle, uint32_t initialWindow)
{
    c->listener = ListenTcp(c->dst, c->port);
    c->listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                   MakeCallback(&Connection::OnAccept, c));
    Ptr<Socket> s = Socket::CreateSocket(c->src, TcpSocketFactory::GetTypeId());
    c->tx = DynamicCast<TcpSocketBase>(s);
    MltcpState* st;
    if (cc == "cubic")
    {
        c->cubic = CreateObject<TcpMlfcCubic>();
        c->tx->SetCongestionControlAlgorithm(c->cubic);
        st = &c->cubic->mltcp;
    }
    else
    {
        c->reno = CreateObject<TcpMlfcReno>();
        c->tx->SetCongestionControlAlgorithm(c->reno);
        st = &c->reno->mltcp;
    }
    st->enabled = mltcp;
    st->slope = slope;
    st->intercept = intercept;
    st->restartAfterIdle = restartAfterIdle;
    st->initialWindow = initialWindow;
    st->progress = &c->progress;
    c->tx->TraceConnectWithoutContext("Tx", MakeCallback(&Connection::OnTx, c));
    c->tx->SetSendCallback(MakeCallback(&Connection::OnSendSpace, c));
    c->tx->Bind();
    // The traffic-control layer learns its devices when the nodes initialise, at the start of the
    // run: the SYN must not leave before that.
    Simulator::Schedule(Seconds(0), &Connection::Connect, c);
}

inline Ptr<MlfcQueueDisc> InstallSwitchQueue(Ptr<NetDevice> dev, SwitchTables* tables, uint32_t port,
                                             uint32_t limit, uint32_t seed)
{
    Ptr<TrafficControlLayer> tc = dev->GetNode()->GetObject<TrafficControlLayer>();
    if (tc->GetRootQueueDiscOnDevice(dev))
        tc->DeleteRootQueueDiscOnDevice(dev);
    Ptr<MlfcQueueDisc> q = CreateObject<MlfcQueueDisc>();
    q->tables = tables;
    q->port = port;
    q->limit = limit;
    q->Seed(seed);
    tc->SetRootQueueDiscOnDevice(dev, q);
    return q;
}

inline Ptr<QueueDisc> InstallHostQueue(Ptr<NetDevice> dev, uint32_t limit)
{
    Ptr<TrafficControlLayer> tc = dev->GetNode()->GetObject<TrafficControlLayer>();
    if (tc->GetRootQueueDiscOnDevice(dev))
        tc->DeleteRootQueueDiscOnDevice(dev);
    Ptr<QueueDisc> q = CreateObjectWithAttributes<FifoQueueDisc>(
        "MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, limit)));
    tc->SetRootQueueDiscOnDevice(dev, q);
    return q;
}

inline uint32_t AddInterface(Ptr<Node> node, Ptr<NetDevice> dev, uint32_t addr, uint32_t mask)
{
    Ptr<Ipv4> ipv4 = node->GetObject<Ipv4>();
    int32_t i = ipv4->AddInterface(dev);
    ipv4->AddAddress(i, Ipv4InterfaceAddress(Ipv4Address(addr), Ipv4Mask(mask)));
    ipv4->SetUp(i);
    return uint32_t(i);
}

inline Ptr<MlfcRouting> RoutingOf(Ptr<Node> node)
{
    return DynamicCast<MlfcRouting>(node->GetObject<Ipv4>()->GetRoutingProtocol());
}

inline uint64_t EventCount()
{
    return Simulator::GetEventCount();
}

} // namespace mlfcsim
