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
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.provider.FileConfigProvider;

/**
 * How both jobs' Kafka clients (source and sink) connect: PLAINTEXT, or the connection settings of a Kafka client
 * properties file ({@code --kafka-config FILE}, the file roles/kafka/tasks/client.yml writes). Only connection
 * settings ({@code security.protocol}, {@code sasl.*}, {@code ssl.*}) are taken from it: everything that shapes the
 * experiment stays an option of the job, read back into run.json.
 *
 * <p>A secret of the file (a setting Kafka types as a password: {@code sasl.jaas.config}, the stores' passwords) never
 * enters the client properties the job serialises into its topology or job graph: they hold a reference that Kafka's
 * {@link FileConfigProvider} resolves from the same file when a client is built on a worker. The file must therefore
 * be at the same path on every host that runs the job's clients, which the experiment writes it to.
 */
public final class KafkaConnection {
    static final String OPTION = "kafka-config";
    static final String PROTOCOL = "security.protocol";
    static final String MECHANISM = "sasl.mechanism";
    static final String PROVIDER = "streamlabfile";

    private final Properties properties;
    private final Path file;

    private KafkaConnection(Properties properties, Path file) {
        this.properties = properties;
        this.file = file;
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
            return new KafkaConnection(new Properties(), null);
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
        return new KafkaConnection(loaded, file.toAbsolutePath());
    }

    /** Whether Kafka's consumer or producer types this setting as a password. */
    static boolean isSecret(String key) {
        for (ConfigDef definition : new ConfigDef[] {ConsumerConfig.configDef(), ProducerConfig.configDef()}) {
            ConfigDef.ConfigKey known = definition.configKeys().get(key);
            if (known != null && known.type == ConfigDef.Type.PASSWORD) {
                return true;
            }
        }
        return false;
    }

    /**
     * The connection settings, to add to a client's properties: each secret as a reference to its key in the file,
     * resolved by the client where it is built, and the provider that resolves it, allowed to read that file only.
     */
    public Properties toProperties() {
        Properties copy = new Properties();
        boolean referenced = false;
        for (String key : properties.stringPropertyNames()) {
            if (isSecret(key)) {
                copy.setProperty(key, "${" + PROVIDER + ":" + file + ":" + key + "}");
                referenced = true;
            } else {
                copy.setProperty(key, properties.getProperty(key));
            }
        }
        if (referenced) {
            copy.setProperty("config.providers", PROVIDER);
            copy.setProperty("config.providers." + PROVIDER + ".class", FileConfigProvider.class.getName());
            copy.setProperty("config.providers." + PROVIDER + ".param." + FileConfigProvider.ALLOWED_PATHS_CONFIG,
                    file.toString());
        }
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
