/*
 * Asks Nimbus over Thrift what the Storm UI's REST API would report, for health checks and
 * experiment statistics, and kills topologies. Prints one JSON document on stdout, and nothing
 * else: every log line goes to stderr.
 *
 *   java -cp <dir of this class>:<storm>/lib-worker/*:<storm conf dir> StormProbe cluster
 *   ... StormProbe topology <name>      executors (host, port) and spout/bolt statistics
 *   ... StormProbe conf <name>          the topology's configuration as Nimbus holds it (one object:
 *                                       Storm's keys and the job's own, e.g. streamlab.*)
 *   ... StormProbe code <name>          each spout's and bolt's serialised object, as Nimbus hands it out
 *   ... StormProbe submitted <name>     both in one JVM: {"conf": ..., "code": ...}
 *   ... StormProbe kill <name> <wait_s> kill, waiting wait_s seconds for in-flight tuples
 *   ... StormProbe running <name> <timeout_s>
 *                                       wait in this one JVM until the topology is ACTIVE with every
 *                                       executor up (uptime > 0), then print it as `topology` does
 *   ... StormProbe gone <name> <timeout_s>
 *                                       wait until Nimbus no longer knows the topology
 *   ... StormProbe watch <name> <interval_ms> <stop_file>
 *                                       one JSON line per interval (the engine's timeline): status,
 *                                       executors and workers per host, worker restarts, spout
 *                                       acked/failed, healthy; ends when stop_file exists
 *
 * Exit codes: 0 answered (running, gone: reached), 2 unknown topology, 3 Nimbus unreachable,
 * 4 running or gone not reached within timeout_s (the last answer is printed), 64 bad usage.
 */

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.TreeMap;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.storm.generated.BoltStats;
import org.apache.storm.generated.ComponentObject;
import org.apache.storm.generated.ClusterSummary;
import org.apache.storm.generated.ExecutorSpecificStats;
import org.apache.storm.generated.ExecutorSummary;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.generated.Nimbus;
import org.apache.storm.generated.NimbusSummary;
import org.apache.storm.generated.NotAliveException;
import org.apache.storm.generated.SpoutStats;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.generated.SupervisorSummary;
import org.apache.storm.generated.TopologyInfo;
import org.apache.storm.generated.TopologySummary;
import org.apache.storm.shade.net.minidev.json.JSONValue;
import org.apache.storm.utils.NimbusClient;
import org.apache.storm.utils.Utils;

public final class StormProbe {
    private static final String ALL_TIME = ":all-time";
    private static final List<String> COMMANDS = List.of("cluster", "topology", "conf", "code", "submitted", "evidence", "kill", "watch", "running", "gone");
    // How often running and gone ask Nimbus (one Thrift call on an open connection each).
    private static final long WAIT_POLL_MS = 500;

    public static void main(String[] args) {
        // stdout carries the JSON document only. storm-client's jar has its own log4j2.xml with a
        // SYSTEM_OUT console appender at INFO (-Dorg.apache.logging.log4j.level=OFF does not touch a
        // found configuration), and any library may print. So keep the real stdout for the answer and
        // point System.out at stderr before anything can log: log4j2 binds its console appender to the
        // System.out of the moment it initialises, which is after this line.
        PrintStream answerOut = System.out;
        System.setOut(System.err);
        int exit = run(args, answerOut);
        answerOut.flush();
        System.exit(exit);
    }

    private static int run(String[] args, PrintStream out) {
        if (args.length == 0 || !COMMANDS.contains(args[0])
                || (!args[0].equals("cluster") && args.length < 2)
                || (args[0].equals("watch") && args.length < 4)
                || ((args[0].equals("running") || args[0].equals("gone") || args[0].equals("evidence")) && args.length < 3)) {
            System.err.println("usage: StormProbe cluster | topology <name> | conf <name> | code <name> | submitted <name>"
                    + " | evidence <name> <wait_s> | kill <name> <wait_s>"
                    + " | watch <name> <interval_ms> <stop_file> | running <name> <timeout_s> | gone <name> <timeout_s>");
            return 64;
        }
        if (args[0].equals("watch")) {
            return watch(args[1], Long.parseLong(args[2]), Path.of(args[3]), out);
        }
        if (args[0].equals("running") || args[0].equals("gone")) {
            return waitFor(args[0].equals("running"), args[1], Long.parseLong(args[2]) * 1000, out);
        }
        if (args[0].equals("evidence")) {
            return evidence(args[1], Long.parseLong(args[2]) * 1000, out);
        }
        Map<String, Object> conf = Utils.readStormConfig();
        try (NimbusClient nimbus = NimbusClient.getConfiguredClient(conf, 20_000)) {
            Object answer;
            switch (args[0]) {
                case "cluster":
                    answer = cluster(nimbus.getClient().getClusterInfo());
                    break;
                case "topology":
                    answer = topology(nimbus.getClient().getTopologyInfoByName(args[1]));
                    break;
                case "conf":
                    answer = topologyConf(nimbus.getClient(), topologyId(nimbus.getClient(), args[1]));
                    break;
                case "code":
                    answer = topologyCode(nimbus.getClient(), topologyId(nimbus.getClient(), args[1]));
                    break;
                case "submitted": {
                    // One JVM for what an experiment keeps of both: each start costs seconds of CPU.
                    String id = topologyId(nimbus.getClient(), args[1]);
                    answer = Map.of("conf", topologyConf(nimbus.getClient(), id),
                            "code", topologyCode(nimbus.getClient(), id));
                    break;
                }
                default:
                    KillOptions options = new KillOptions();
                    options.set_wait_secs(args.length > 2 ? Integer.parseInt(args[2]) : 0);
                    nimbus.getClient().killTopologyWithOpts(args[1], options);
                    answer = Map.of("killed", args[1], "wait_s", options.get_wait_secs());
            }
            out.println(JSONValue.toJSONString(answer));
            return 0;
        } catch (NotAliveException e) {
            out.println(JSONValue.toJSONString(Map.of("error", "no topology named " + args[1])));
            return 2;
        } catch (Exception e) {
            out.println(JSONValue.toJSONString(Map.of("error", "Nimbus unreachable: " + e)));
            return 3;
        }
    }

    /**
     * What a loop of `topology` probes did, in one JVM and on one connection: every WAIT_POLL_MS,
     * ask Nimbus about the topology until it runs (untilRunning: ACTIVE, at least one executor, and
     * every executor up, uptime > 0; a topology Nimbus does not know yet is waited for) or is gone
     * (Nimbus no longer knows it), for at most timeoutMs. Prints the last answer with "waited_ms":
     * the topology as `topology` prints it, or {"error": ...}. Exit 0 reached, 4 not reached.
     */
    private static int waitFor(boolean untilRunning, String name, long timeoutMs, PrintStream out) {
        Map<String, Object> conf = Utils.readStormConfig();
        long start = System.currentTimeMillis();
        NimbusClient nimbus = null;
        try {
            while (true) {
                Map<String, Object> answer;
                boolean reached;
                try {
                    if (nimbus == null) {
                        nimbus = NimbusClient.getConfiguredClient(conf, 5_000);
                    }
                    answer = topology(nimbus.getClient().getTopologyInfoByName(name));
                    reached = untilRunning && isRunning(answer);
                } catch (NotAliveException e) {
                    answer = new LinkedHashMap<>(Map.of("error", "no topology named " + name));
                    reached = !untilRunning;
                } catch (Exception e) {
                    answer = new LinkedHashMap<>(Map.of("error", "Nimbus unreachable: " + e));
                    reached = false;
                    if (nimbus != null) {
                        nimbus.close();
                        nimbus = null;
                    }
                }
                long waited = System.currentTimeMillis() - start;
                if (reached || waited >= timeoutMs) {
                    answer.put("waited_ms", waited);
                    out.println(JSONValue.toJSONString(answer));
                    return reached ? 0 : 4;
                }
                Thread.sleep(Math.min(WAIT_POLL_MS, timeoutMs - waited));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            out.println(JSONValue.toJSONString(Map.of("error", "interrupted")));
            return 4;
        } finally {
            if (nimbus != null) {
                nimbus.close();
            }
        }
    }

    /**
     * What an experiment keeps of the topology once it has run, in one JVM: its statistics as
     * `topology` prints them, once they count the run's spout tuples (workers report every
     * executor.metrics.frequency.secs, so the first answer may predate the run) or after timeoutMs,
     * and what `submitted` prints. The count is of acked tuples, or of emitted ones for a topology
     * without ackers (an at-most-once one acks nothing). Prints {"topology", "conf", "code",
     * "waited_ms", "counted"} or {"error"}; exit 0, 2 when Nimbus knows no such topology, 3 when it
     * cannot be asked, 4 when no report counted a tuple within timeoutMs (the answer is still
     * printed).
     */
    private static int evidence(String name, long timeoutMs, PrintStream out) {
        Map<String, Object> conf = Utils.readStormConfig();
        long start = System.currentTimeMillis();
        try (NimbusClient nimbus = NimbusClient.getConfiguredClient(conf, 20_000)) {
            String id = topologyId(nimbus.getClient(), name);
            Map<?, ?> topologyConf = topologyConf(nimbus.getClient(), id);
            Object ackers = topologyConf.get("topology.acker.executors");
            String counted = ackers instanceof Number && ((Number) ackers).intValue() == 0
                    ? "spout_emitted" : "spout_acked";
            Map<String, Object> topology = topology(nimbus.getClient().getTopologyInfoByName(name));
            while (((Number) topology.get(counted)).longValue() == 0
                    && System.currentTimeMillis() - start < timeoutMs) {
                Thread.sleep(WAIT_POLL_MS);
                topology = topology(nimbus.getClient().getTopologyInfoByName(name));
            }
            Map<String, Object> answer = new LinkedHashMap<>();
            answer.put("topology", topology);
            answer.put("conf", topologyConf);
            answer.put("code", topologyCode(nimbus.getClient(), id));
            answer.put("waited_ms", System.currentTimeMillis() - start);
            answer.put("counted", counted);
            out.println(JSONValue.toJSONString(answer));
            return ((Number) topology.get(counted)).longValue() > 0 ? 0 : 4;
        } catch (NotAliveException e) {
            out.println(JSONValue.toJSONString(Map.of("error", "no topology named " + name)));
            return 2;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            out.println(JSONValue.toJSONString(Map.of("error", "interrupted")));
            return 3;
        } catch (Exception e) {
            out.println(JSONValue.toJSONString(Map.of("error", "Nimbus unreachable: " + e)));
            return 3;
        }
    }

    private static boolean isRunning(Map<String, Object> topology) {
        List<?> executors = (List<?>) topology.get("executors");
        return "ACTIVE".equals(topology.get("status")) && !executors.isEmpty()
                && executors.stream().allMatch(e -> ((Number) ((Map<?, ?>) e).get("uptime_s")).longValue() > 0);
    }

    /** The id Nimbus gave the running topology of that name. */
    private static String topologyId(Nimbus.Iface nimbus, String name) throws Exception {
        return nimbus.getTopologySummaryByName(name).get_id();
    }

    /**
     * The configuration Nimbus stored for the topology at submission (getTopologyConf: a JSON
     * object, as the UI's /api/v1/topology/:id "configuration" shows it).
     */
    private static Map<?, ?> topologyConf(Nimbus.Iface nimbus, String id) throws Exception {
        Object conf = JSONValue.parseWithException(nimbus.getTopologyConf(id));
        if (!(conf instanceof Map)) {
            throw new IllegalStateException("Nimbus returned a configuration that is not a JSON object");
        }
        return (Map<?, ?>) conf;
    }

    /**
     * What Nimbus hands anyone who asks for the topology (getUserTopology): each spout's and bolt's
     * serialised Java object, base64, so that what it carries (a password, say) can be looked for.
     */
    private static Map<String, Object> topologyCode(Nimbus.Iface nimbus, String topologyId) throws Exception {
        StormTopology topology = nimbus.getUserTopology(topologyId);
        Map<String, Object> components = new TreeMap<>();
        topology.get_spouts().forEach((id, spec) -> components.put(id, serialized(spec.get_spout_object())));
        topology.get_bolts().forEach((id, spec) -> components.put(id, serialized(spec.get_bolt_object())));
        return Map.of("components", components);
    }

    private static String serialized(ComponentObject object) {
        return object.is_set_serialized_java() ? Base64.getEncoder().encodeToString(object.get_serialized_java()) : "";
    }

    private static Map<String, Object> cluster(ClusterSummary summary) {
        List<Object> nimbuses = new ArrayList<>();
        for (NimbusSummary n : summary.get_nimbuses()) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("host", n.get_host());
            item.put("port", n.get_port());
            item.put("leader", n.is_isLeader());
            item.put("version", n.get_version());
            item.put("uptime_s", n.get_uptime_secs());
            nimbuses.add(item);
        }
        List<Object> supervisors = new ArrayList<>();
        int slotsTotal = 0;
        int slotsUsed = 0;
        for (SupervisorSummary s : summary.get_supervisors()) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("id", s.get_supervisor_id());
            item.put("host", s.get_host());
            item.put("slots_total", s.get_num_workers());
            item.put("slots_used", s.get_num_used_workers());
            item.put("uptime_s", s.get_uptime_secs());
            slotsTotal += s.get_num_workers();
            slotsUsed += s.get_num_used_workers();
            supervisors.add(item);
        }
        List<Object> topologies = new ArrayList<>();
        for (TopologySummary t : summary.get_topologies()) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("id", t.get_id());
            item.put("name", t.get_name());
            item.put("status", t.get_status());
            item.put("workers", t.get_num_workers());
            item.put("executors", t.get_num_executors());
            topologies.add(item);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("nimbuses", nimbuses);
        out.put("supervisors", supervisors);
        out.put("slots_total", slotsTotal);
        out.put("slots_used", slotsUsed);
        out.put("slots_free", slotsTotal - slotsUsed);
        out.put("topologies", topologies);
        return out;
    }

    private static Map<String, Object> topology(TopologyInfo info) {
        long acked = 0;
        long emitted = 0;
        long failed = 0;
        double latencyWeighted = 0;
        List<Object> executors = new ArrayList<>();
        for (ExecutorSummary e : info.get_executors()) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("component", e.get_component_id());
            item.put("host", e.get_host());
            item.put("port", e.get_port());
            item.put("uptime_s", e.get_uptime_secs());
            ExecutorSpecificStats specific = e.is_set_stats() ? e.get_stats().get_specific() : null;
            if (specific != null && specific.is_set_spout()) {
                SpoutStats spout = specific.get_spout();
                long a = sum(spout.get_acked().get(ALL_TIME));
                double latency = mean(spout.get_complete_ms_avg().get(ALL_TIME));
                long m = e.get_stats().is_set_emitted() ? sumStreams(e.get_stats().get_emitted().get(ALL_TIME)) : 0;
                item.put("acked", a);
                item.put("emitted", m);
                item.put("failed", sum(spout.get_failed().get(ALL_TIME)));
                item.put("complete_latency_ms", latency);
                acked += a;
                emitted += m;
                failed += sum(spout.get_failed().get(ALL_TIME));
                latencyWeighted += latency * a;
            } else if (specific != null && specific.is_set_bolt()) {
                BoltStats bolt = specific.get_bolt();
                item.put("acked", sum(bolt.get_acked().get(ALL_TIME)));
                item.put("failed", sum(bolt.get_failed().get(ALL_TIME)));
                item.put("executed", sum(bolt.get_executed().get(ALL_TIME)));
            }
            executors.add(item);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("id", info.get_id());
        out.put("name", info.get_name());
        out.put("status", info.get_status());
        out.put("uptime_s", info.get_uptime_secs());
        out.put("spout_acked", acked);
        out.put("spout_emitted", emitted);
        out.put("spout_failed", failed);
        out.put("complete_latency_ms", acked == 0 ? null : latencyWeighted / acked);
        out.put("executors", executors);
        Map<String, Object> errors = new LinkedHashMap<>();
        info.get_errors().forEach((component, list) -> {
            List<Object> messages = new ArrayList<>();
            list.forEach(error -> messages.add(Map.of(
                    "time_s", error.get_error_time_secs(), "host", String.valueOf(error.get_host()),
                    "error", error.get_error())));
            errors.put(component, messages);
        });
        out.put("errors", errors);
        return out;
    }

    /**
     * The engine's timeline: every interval, what Nimbus says of the topology, one JSON line each
     * (flushed), until stop_file exists. A worker (host:port) counts as restarted when its
     * executors' uptime went down or it appeared after the first sample; healthy is ACTIVE with
     * every executor of the first sample running (uptime > 0). A failed request is a line with
     * "error"; the watch goes on.
     */
    private static int watch(String name, long intervalMs, Path stopFile, PrintStream out) {
        Map<String, Object> conf = Utils.readStormConfig();
        Map<String, Long> lastUptime = new HashMap<>();
        long restarts = 0;
        int expectedExecutors = -1;
        NimbusClient nimbus = null;
        while (!Files.exists(stopFile)) {
            long started = System.currentTimeMillis();
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("t_ms", started);
            try {
                if (nimbus == null) {
                    nimbus = NimbusClient.getConfiguredClient(conf, 5_000);
                }
                TopologyInfo info = nimbus.getClient().getTopologyInfoByName(name);
                Map<String, Long> uptime = new TreeMap<>();
                Map<String, Integer> perHost = new TreeMap<>();
                int running = 0;
                for (ExecutorSummary e : info.get_executors()) {
                    String worker = e.get_host() + ":" + e.get_port();
                    uptime.merge(worker, (long) e.get_uptime_secs(), Math::min);
                    perHost.merge(e.get_host(), 1, Integer::sum);
                    running += e.get_uptime_secs() > 0 ? 1 : 0;
                }
                for (Map.Entry<String, Long> w : uptime.entrySet()) {
                    Long before = lastUptime.get(w.getKey());
                    if ((before == null && !lastUptime.isEmpty()) || (before != null && w.getValue() < before)) {
                        restarts++;
                    }
                }
                if (!uptime.isEmpty()) {
                    lastUptime = new HashMap<>(uptime);
                }
                if (expectedExecutors < 0 && !info.get_executors().isEmpty()) {
                    expectedExecutors = info.get_executors().size();
                }
                Map<String, Object> topology = topology(info);
                line.put("status", info.get_status());
                line.put("executors", info.get_executors().size());
                line.put("executors_running", running);
                line.put("executors_per_host", perHost);
                line.put("workers", new ArrayList<>(uptime.keySet()));
                line.put("worker_restarts", restarts);
                line.put("spout_acked", topology.get("spout_acked"));
                line.put("spout_failed", topology.get("spout_failed"));
                line.put("healthy", "ACTIVE".equals(info.get_status()) && expectedExecutors > 0
                        && running == expectedExecutors);
            } catch (NotAliveException e) {
                line.put("error", "no topology named " + name);
                line.put("healthy", false);
            } catch (Exception e) {
                line.put("error", "Nimbus unreachable: " + e);
                line.put("healthy", false);
                if (nimbus != null) {
                    nimbus.close();
                    nimbus = null;
                }
            }
            out.println(JSONValue.toJSONString(line));
            out.flush();
            long left = intervalMs - (System.currentTimeMillis() - started);
            if (left > 0) {
                try {
                    Thread.sleep(left);
                } catch (InterruptedException e) {
                    break;
                }
            }
        }
        if (nimbus != null) {
            nimbus.close();
        }
        return 0;
    }

    private static <K> long sum(Map<K, Long> counts) {
        return counts == null ? 0 : counts.values().stream().mapToLong(Long::longValue).sum();
    }

    /** Tuples emitted on the component's own streams, Storm's system streams (__ack_init...) left out. */
    private static long sumStreams(Map<String, Long> byStream) {
        return byStream == null ? 0 : byStream.entrySet().stream().filter(s -> !s.getKey().startsWith("__"))
                .mapToLong(Map.Entry::getValue).sum();
    }

    private static <K> double mean(Map<K, Double> averages) {
        return averages == null || averages.isEmpty() ? 0
                : averages.values().stream().mapToDouble(Double::doubleValue).average().orElse(0);
    }
}
