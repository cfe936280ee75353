package streamlab;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

/**
 * How both jobs' Kafka clients (source and sink) connect: PLAINTEXT, or the connection settings of a Kafka client
 * properties file ({@code --kafka-config FILE}, the file roles/kafka/tasks/client.yml writes). Only connection
 * settings ({@code security.protocol}, {@code sasl.*}, {@code ssl.*}) are taken from it: everything that shapes the
 * experiment stays an option of the job, read back into run.json.
 */
public final class KafkaConnection {
    static final String OPTION = "kafka-config";
    static final String PROTOCOL = "security.protocol";
    static final String MECHANISM = "sasl.mechanism";

    private final Properties properties;

    private KafkaConnection(Properties properties) {
        this.properties = properties;
    }

    /** {@code known} plus {@code kafka-config}. */
    public static Set<String> withOption(Set<String> known) {
        Set<String> all = new HashSet<>(known);
        all.add(OPTION);
        return Set.copyOf(all);
    }

    /** PLAINTEXT without {@code --kafka-config}, else the connection settings of that file. */
    static KafkaConnection from(Args args) {
        if (!args.has(OPTION)) {
            return new KafkaConnection(new Properties());
        }
        return load(Path.of(args.required(OPTION)));
    }

    static KafkaConnection load(Path file) {
        Properties loaded = new Properties();
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            loaded.load(reader);
        } catch (IOException e) {
            throw new IllegalArgumentException("--" + OPTION + ": cannot read " + file + ": " + e, e);
        }
        for (String key : loaded.stringPropertyNames()) {
            if (!(key.equals(PROTOCOL) || key.startsWith("sasl.") || key.startsWith("ssl."))) {
                throw new IllegalArgumentException("--" + OPTION + ": " + file + " sets " + key
                        + "; it may hold connection settings only (security.protocol, sasl.*, ssl.*)");
            }
        }
        return new KafkaConnection(loaded);
    }

    /** A copy of the connection settings, to add to a client's properties. */
    public Properties toProperties() {
        Properties copy = new Properties();
        copy.putAll(properties);
        return copy;
    }

    /**
     * The {@code streamlab.kafka.*} read-back entries taken from the properties a client was really built with:
     * the protocol and mechanism, never a password.
     */
    public static Map<String, String> describe(Properties clientConfig) {
        Map<String, String> out = new LinkedHashMap<>();
        out.put(ReadBack.KAFKA_SECURITY_PROTOCOL, String.valueOf(clientConfig.getOrDefault(PROTOCOL, "PLAINTEXT")));
        out.put(ReadBack.KAFKA_SASL_MECHANISM, String.valueOf(clientConfig.getOrDefault(MECHANISM, "(none)")));
        return out;
    }

    @Override
    public String toString() {
        return "KafkaConnection" + describe(properties);
    }
}
