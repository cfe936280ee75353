package streamlab;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;

/**
 * A transactional sink's transaction.timeout.ms must not exceed any broker's transaction.max.timeout.ms, or the
 * brokers refuse its transactions only once records flow; checked before the job is submitted.
 */
final class TransactionTimeout {
    static final String BROKER_MAX = "transaction.max.timeout.ms";

    private TransactionTimeout() {}

    /** The brokers whose maximum is below {@code wantedMs}, as "broker N: M ms"; empty when all allow it. */
    static List<String> tooShort(long wantedMs, Map<String, Long> brokerMaxMs) {
        List<String> out = new ArrayList<>();
        brokerMaxMs.forEach((broker, max) -> {
            if (max < wantedMs) {
                out.add("broker " + broker + ": " + max + " ms");
            }
        });
        return out;
    }

    /** Asks every broker for its maximum and fails, naming them, when one is below {@code wantedMs}. */
    static void checkAgainstBrokers(long wantedMs, Properties clientConfig, String bootstrap) throws Exception {
        Properties props = new Properties();
        props.putAll(clientConfig);
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Map<String, Long> maxima = new java.util.TreeMap<>();
        try (Admin admin = Admin.create(props)) {
            Collection<Node> nodes = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS);
            List<ConfigResource> brokers = nodes.stream()
                    .map(n -> new ConfigResource(ConfigResource.Type.BROKER, n.idString())).toList();
            Map<ConfigResource, Config> configs = admin.describeConfigs(brokers).all().get(30, TimeUnit.SECONDS);
            configs.forEach((resource, config) -> {
                ConfigEntry entry = config.get(BROKER_MAX);
                if (entry != null && entry.value() != null) {
                    maxima.put(resource.name(), Long.parseLong(entry.value()));
                }
            });
        }
        List<String> low = tooShort(wantedMs, maxima);
        if (!low.isEmpty()) {
            throw new IllegalArgumentException("the exactly-once sink's transaction.timeout.ms (" + wantedMs
                    + " ms) is above " + BROKER_MAX + " of " + String.join(", ", low)
                    + ": raise it on the brokers (kafka role) to at least " + wantedMs + " ms");
        }
    }
}
