package streamlab;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.storm.Config;
import org.apache.storm.StormSubmitter;
import org.apache.storm.generated.Bolt;
import org.apache.storm.generated.Grouping;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.kafka.bolt.KafkaBolt;
import org.apache.storm.kafka.bolt.mapper.FieldNameBasedTupleToKafkaMapper;
import org.apache.storm.kafka.bolt.selector.DefaultTopicSelector;
import org.apache.storm.kafka.spout.FirstPollOffsetStrategy;
import org.apache.storm.kafka.spout.KafkaSpout;
import org.apache.storm.kafka.spout.KafkaSpoutConfig;
import org.apache.storm.kafka.spout.RecordTranslator;
import org.apache.storm.policy.WaitStrategyPark;
import org.apache.storm.topology.BasicBoltExecutor;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;
import org.apache.storm.utils.Utils;
import org.apache.storm.utils.VersionInfo;

/**
 * Reads JSON records from a Kafka topic, adds {@code engine="storm"} and {@code processed_ms}, and writes them
 * to a result topic under the chosen {@link Guarantee}:
 * <ul>
 * <li>at_least_once: the KafkaSpout (AT_LEAST_ONCE) commits an offset only after its tuple tree is acked; the
 * enrich bolt anchors its output to the input tuple; the KafkaBolt acks only when the producer confirmed the
 * write and fails the tuple otherwise; failed or timed-out tuples (topology.message.timeout.secs) are replayed
 * by the spout.
 * <li>at_most_once: the KafkaSpout (AT_MOST_ONCE) commits the offsets of each poll before it emits the records,
 * untracked, and the topology runs no ackers: a restarted spout resumes after what was polled, so nothing is
 * read twice and what was in flight is lost.
 * </ul>
 * exactly_once is refused: the KafkaBolt writes no transactions.
 *
 * <p>Options: [--kafka-config FILE] --bootstrap --input-topic --output-topic --group-id [--guarantee at_least_once] [--name streamlab-storm-&lt;input-topic&gt;]
 * [--workers 2] [--spout-parallelism W] [--bolt-parallelism S] [--message-timeout-s 30]
 * [--max-spout-pending 1000] [--ackers W, 0 at most once] [--offset-commit-period-ms 30000] [--wait-strategy park|progressive]
 * [--wait-park-us 100] and the sink options of {@link SinkSettings} (--sink-acks all --sink-linger-ms 5
 * --sink-batch-size 65536 --sink-compression none --sink-idempotence true --sink-max-in-flight 5).
 *
 * <p>The settings the topology really runs with go into the topology configuration ({@link ReadBack} keys next
 * to Storm's own), which Nimbus keeps: {@code storm-probe conf <name>} prints it.
 *
 * <p>Submitted like {@code storm jar} does: {@code java -cp <jar>:<storm>/lib-worker/* -Dstorm.jar=<jar>
 * -Dstorm.options=nimbus.seeds=["host"],nimbus.thrift.port=6627 streamlab.StormJob ...}.
 */
public final class StormJob {
    static final String ENGINE = "storm";
    static final String SPOUT_ID = "kafka-spout";
    static final String ENRICH_ID = "enrich";
    static final String SINK_ID = "kafka-bolt";
    static final String WAIT_PARK = "park";
    static final String WAIT_PROGRESSIVE = "progressive";

    /** What Storm's KafkaBolt cannot give: it writes each record on its own, outside any transaction. */
    static final String NO_EXACTLY_ONCE = "Storm's KafkaBolt is not transactional";

    private static final Set<String> OPTIONS = Guarantee.withOption(DeliberateLoss.withOption(
            KafkaConnection.withOption(SinkSettings.withOptions(Set.of(
                    "bootstrap", "input-topic", "output-topic", "group-id", "name", "workers", "spout-parallelism",
                    "bolt-parallelism", "message-timeout-s", "max-spout-pending", "ackers",
                    "offset-commit-period-ms", "wait-strategy", "wait-park-us")))));

    private StormJob() {}

    /** Parsed topology options. */
    record Options(String bootstrap, String inputTopic, String outputTopic, String groupId, String name,
                   int workers, int spoutParallelism, int boltParallelism, int messageTimeoutS,
                   int maxSpoutPending, int ackers, long offsetCommitPeriodMs, String waitStrategy,
                   long waitParkUs, SinkSettings sink, KafkaConnection kafka, DeliberateLoss loss,
                   Guarantee guarantee) {

        static Options parse(String[] argv) {
            Args args = new Args(argv, OPTIONS);
            String inputTopic = args.required("input-topic");
            int workers = args.getInt("workers", 2);
            int spoutParallelism = args.getInt("spout-parallelism", workers);
            Guarantee guarantee = Guarantee.from(args, EnumSet.of(Guarantee.AT_MOST_ONCE, Guarantee.AT_LEAST_ONCE),
                    NO_EXACTLY_ONCE);
            Options o = new Options(
                    args.required("bootstrap"),
                    inputTopic,
                    args.required("output-topic"),
                    args.required("group-id"),
                    args.get("name", "streamlab-storm-" + inputTopic),
                    workers,
                    spoutParallelism,
                    args.getInt("bolt-parallelism", spoutParallelism),
                    args.getInt("message-timeout-s", 30),
                    args.getInt("max-spout-pending", 1000),
                    args.getInt("ackers", guarantee == Guarantee.AT_MOST_ONCE ? 0 : workers),
                    args.getLong("offset-commit-period-ms", KafkaSpoutConfig.DEFAULT_OFFSET_COMMIT_PERIOD_MS),
                    args.getChoice("wait-strategy", WAIT_PARK, Set.of(WAIT_PARK, WAIT_PROGRESSIVE)),
                    args.getLong("wait-park-us", 100),
                    SinkSettings.from(args),
                    KafkaConnection.from(args),
                    DeliberateLoss.from(args),
                    guarantee);
            if (o.workers < 1 || o.spoutParallelism < 1 || o.boltParallelism < 1 || o.messageTimeoutS < 1
                    || o.maxSpoutPending < 1 || o.offsetCommitPeriodMs < 1) {
                throw new IllegalArgumentException("counts, timeouts and periods must be >= 1");
            }
            if (o.guarantee == Guarantee.AT_LEAST_ONCE && o.ackers < 1) {
                // Without ackers Storm acks every tuple on emit: no at-least-once.
                throw new IllegalArgumentException("--ackers must be >= 1 for at-least-once");
            }
            if (o.guarantee == Guarantee.AT_MOST_ONCE && o.ackers != 0) {
                // The spout emits untracked tuples at most once: ackers would only cost threads.
                throw new IllegalArgumentException("--ackers must be 0 for at-most-once");
            }
            if (o.waitParkUs < 0) {
                throw new IllegalArgumentException("--wait-park-us must be >= 0 (0 busy-spins)");
            }
            return o;
        }
    }

    /** What gets submitted: the topology and its configuration (Storm's keys and the streamlab.* read-back). */
    record Submission(StormTopology topology, Config config) {}

    public static void main(String[] argv) throws Exception {
        Options options = Options.parse(argv);
        Submission submission = build(options);
        StormSubmitter.submitTopologyWithProgressBar(options.name(), submission.config(), submission.topology());
    }

    /** Builds the topology, then its configuration, and records in it what was built. */
    static Submission build(Options options) {
        KafkaSpoutConfig<String, String> spoutConfig = spoutConfig(options);
        KafkaBolt<String, String> sink = sinkBolt(options);
        StormTopology topology = topology(options, spoutConfig, sink);
        Config conf = config(options);
        conf.putAll(readBack(conf, topology, spoutConfig, producerConfig(sink)));
        return new Submission(topology, conf);
    }

    /**
     * Storm's own topology keys, which Storm enforces: workers, message timeout, max spout pending, ackers and,
     * for {@code --wait-strategy park}, the spout/bolt/backpressure wait strategies. The worker heap
     * (worker.heap.memory.mb, topology.worker.max.heap.size.mb) stays the cluster's.
     */
    static Config config(Options options) {
        Config conf = new Config();
        conf.setNumWorkers(options.workers());
        conf.setMessageTimeoutSecs(options.messageTimeoutS());
        conf.setMaxSpoutPending(options.maxSpoutPending());
        conf.setNumAckers(options.ackers());
        if (WAIT_PARK.equals(options.waitStrategy())) {
            // WaitStrategyPark parks for <situation>.park.microsec (0 busy-spins) instead of Storm's default
            // WaitStrategyProgressive, which spins before it sleeps.
            String park = WaitStrategyPark.class.getName();
            conf.put(Config.TOPOLOGY_SPOUT_WAIT_STRATEGY, park);
            conf.put(Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC, options.waitParkUs());
            conf.put(Config.TOPOLOGY_BOLT_WAIT_STRATEGY, park);
            conf.put(Config.TOPOLOGY_BOLT_WAIT_PARK_MICROSEC, options.waitParkUs());
            conf.put(Config.TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY, park);
            conf.put(Config.TOPOLOGY_BACKPRESSURE_WAIT_PARK_MICROSEC, options.waitParkUs());
        }
        return conf;
    }

    /** The {@code streamlab.*} entries, each taken from the built topology, spout config, producer or conf. */
    /**
     * The deliberate-loss setting of the enrich bolt as it will be submitted: its serialised object, a
     * BasicBoltExecutor around the EnrichBolt (whose field is private, so reflection).
     */
    static long loss(StormTopology topology) {
        byte[] bytes = topology.get_bolts().get(ENRICH_ID).get_bolt_object().get_serialized_java();
        BasicBoltExecutor executor = Utils.javaDeserialize(bytes, BasicBoltExecutor.class);
        try {
            Field bolt = BasicBoltExecutor.class.getDeclaredField("bolt");
            bolt.setAccessible(true);
            return ((EnrichBolt) bolt.get(executor)).loss.every();
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("cannot read the enrich bolt back from the topology", e);
        }
    }

    static Map<String, String> readBack(Map<String, Object> conf, StormTopology topology,
                                        KafkaSpoutConfig<?, ?> spoutConfig, Properties producerConfig) {
        Properties build = ReadBack.buildProperties(StormJob.class);
        Bolt enrich = topology.get_bolts().get(ENRICH_ID);
        Bolt sink = topology.get_bolts().get(SINK_ID);
        Map<String, String> out = new LinkedHashMap<>();
        out.put(ReadBack.ENGINE, ENGINE);
        out.put(ReadBack.ENGINE_VERSION, VersionInfo.getVersion());
        out.put(ReadBack.BUILD_ENGINE_VERSION, build.getProperty("engine.version"));
        out.put(ReadBack.SOURCE_TASKS,
                Integer.toString(topology.get_spouts().get(SPOUT_ID).get_common().get_parallelism_hint()));
        out.put(ReadBack.PROCESS_TASKS, Integer.toString(enrich.get_common().get_parallelism_hint()));
        out.put(ReadBack.SINK_TASKS, Integer.toString(sink.get_common().get_parallelism_hint()));
        out.put(ReadBack.GROUPING, grouping(enrich, sink));
        out.putAll(SinkSettings.describe(producerConfig));
        out.putAll(KafkaConnection.describe(producerConfig));
        KafkaSpoutConfig.ProcessingGuarantee processing = spoutConfig.getProcessingGuarantee();
        int ackers = ((Number) conf.get(Config.TOPOLOGY_ACKER_EXECUTORS)).intValue();
        out.put(ReadBack.GUARANTEE, guarantee(processing, ackers).option());
        out.put(ReadBack.PROCESSING_GUARANTEE, processing.name());
        out.put(ReadBack.ACKERS, Integer.toString(ackers));
        // The KafkaBolt acks a tuple only in the producer callback of a successful write (fireAndForget=false);
        // without ackers nothing waits for that ack.
        out.put(ReadBack.SINK_DELIVERY_GUARANTEE, ackers > 0 ? ReadBack.AT_LEAST_ONCE : ReadBack.NONE);
        out.put(ReadBack.TEST_DROP_EVERY, Long.toString(loss(topology)));
        out.put(ReadBack.KAFKA_CLIENTS_VERSION, ReadBack.kafkaClientsVersion());
        out.put(ReadBack.CONNECTOR_VERSION, build.getProperty("connector.version"));
        out.put(ReadBack.OFFSET_COMMIT_PERIOD_MS, Long.toString(spoutConfig.getOffsetsCommitPeriodMs()));
        out.put(ReadBack.OFFSET_COMMIT, processing == KafkaSpoutConfig.ProcessingGuarantee.AT_MOST_ONCE
                ? "each poll, before its records are emitted" : "acked offsets, every offset_commit_period_ms");
        out.put(ReadBack.WAIT_STRATEGY, waitStrategy(conf));
        if (WAIT_PARK.equals(out.get(ReadBack.WAIT_STRATEGY))) {
            out.put(ReadBack.WAIT_PARK_US, String.valueOf(conf.get(Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC)));
        }
        return out;
    }

    /**
     * What the topology guarantees, from what it was built with: an AT_LEAST_ONCE spout with ackers is at least
     * once; an AT_MOST_ONCE spout at most once, whatever the ackers.
     */
    static Guarantee guarantee(KafkaSpoutConfig.ProcessingGuarantee processing, int ackers) {
        if (processing == KafkaSpoutConfig.ProcessingGuarantee.AT_LEAST_ONCE && ackers > 0) {
            return Guarantee.AT_LEAST_ONCE;
        }
        if (processing == KafkaSpoutConfig.ProcessingGuarantee.AT_MOST_ONCE) {
            return Guarantee.AT_MOST_ONCE;
        }
        throw new IllegalStateException("a " + processing + " spout with " + ackers
                + " ackers keeps no guarantee this kit names");
    }

    /** The groupings of the spout -> enrich and enrich -> sink edges, named like TopologyBuilder's methods. */
    static String grouping(Bolt enrich, Bolt sink) {
        Set<String> names = new TreeSet<>();
        List<Grouping> groupings = new ArrayList<>(enrich.get_common().get_inputs().values());
        groupings.addAll(sink.get_common().get_inputs().values());
        for (Grouping g : groupings) {
            names.add(groupingName(g));
        }
        return String.join(", ", names);
    }

    static String groupingName(Grouping grouping) {
        switch (grouping.getSetField()) {
            case LOCAL_OR_SHUFFLE:
                return "localOrShuffle";
            case CUSTOM_OBJECT:
            case CUSTOM_SERIALIZED:
                return "custom";
            default:
                return grouping.getSetField().getFieldName().toLowerCase(Locale.ROOT);
        }
    }

    /** "park" when all three wait strategies are WaitStrategyPark, "progressive" when none is set (Storm's). */
    static String waitStrategy(Map<String, Object> conf) {
        List<Object> strategies = new ArrayList<>();
        strategies.add(conf.get(Config.TOPOLOGY_SPOUT_WAIT_STRATEGY));
        strategies.add(conf.get(Config.TOPOLOGY_BOLT_WAIT_STRATEGY));
        strategies.add(conf.get(Config.TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY));
        if (strategies.stream().allMatch(WaitStrategyPark.class.getName()::equals)) {
            return WAIT_PARK;
        }
        if (strategies.stream().allMatch(s -> s == null)) {
            return WAIT_PROGRESSIVE;
        }
        return "mixed " + strategies;
    }

    static KafkaSpoutConfig<String, String> spoutConfig(Options options) {
        return KafkaSpoutConfig.builder(options.bootstrap(), options.inputTopic())
                .setGroupId(options.groupId())
                .setProp(options.kafka().toProperties())
                .setProcessingGuarantee(options.guarantee() == Guarantee.AT_MOST_ONCE
                        ? KafkaSpoutConfig.ProcessingGuarantee.AT_MOST_ONCE
                        : KafkaSpoutConfig.ProcessingGuarantee.AT_LEAST_ONCE)
                // Resume from the group's committed offset; from the earliest offset if it has none.
                .setFirstPollOffsetStrategy(FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST)
                .setOffsetCommitPeriodMs(options.offsetCommitPeriodMs())
                .setRecordTranslator(new KeyValueTranslator())
                .build();
    }

    /** The shared sink settings plus this producer's bootstrap servers and (String) serializers. */
    static Properties producerProperties(Options options) {
        Properties props = options.sink().toProperties();
        props.putAll(options.kafka().toProperties());
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrap());
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return props;
    }

    static KafkaBolt<String, String> sinkBolt(Options options) {
        KafkaBolt<String, String> sink = new KafkaBolt<String, String>()
                .withProducerProperties(producerProperties(options))
                .withTopicSelector(new DefaultTopicSelector(options.outputTopic()))
                .withTupleToKafkaMapper(new FieldNameBasedTupleToKafkaMapper<>(
                        EnrichBolt.KEY, EnrichBolt.MESSAGE));
        // Storm's defaults, made explicit: ack only in the callback of a successful send.
        sink.setFireAndForget(false);
        sink.setAsync(true);
        return sink;
    }

    /** The producer properties the KafkaBolt holds (and serializes to its workers); a private field, so reflection. */
    static Properties producerConfig(KafkaBolt<?, ?> sink) {
        try {
            Field field = KafkaBolt.class.getDeclaredField("boltSpecifiedProperties");
            field.setAccessible(true);
            return (Properties) field.get(sink);
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("cannot read the KafkaBolt's producer properties back", e);
        }
    }

    static StormTopology topology(Options options) {
        return topology(options, spoutConfig(options), sinkBolt(options));
    }

    static StormTopology topology(Options options, KafkaSpoutConfig<String, String> spoutConfig,
                                  KafkaBolt<String, String> sink) {
        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout(SPOUT_ID, new KafkaSpout<>(spoutConfig), options.spoutParallelism());
        // Local-or-shuffle on both edges: a tuple stays in its worker when that worker runs the next component
        // (as Flink's chained source -> map -> sink does), and only crosses workers when it does not.
        builder.setBolt(ENRICH_ID, new EnrichBolt(options.loss()), options.boltParallelism())
                .localOrShuffleGrouping(SPOUT_ID);
        builder.setBolt(SINK_ID, sink, options.boltParallelism())
                .localOrShuffleGrouping(ENRICH_ID);
        return builder.createTopology();
    }

    /** ConsumerRecord -> (key, value, topic, partition, offset); key and value may be null. */
    static final class KeyValueTranslator implements RecordTranslator<String, String> {
        private static final long serialVersionUID = 1L;
        static final Fields FIELDS = new Fields("key", "value", "topic", "partition", "offset");

        @Override
        public List<Object> apply(ConsumerRecord<String, String> record) {
            return new Values(record.key(), record.value(), record.topic(), record.partition(), record.offset());
        }

        @Override
        public Fields getFieldsFor(String stream) {
            return FIELDS;
        }
    }

    /**
     * Adds engine/processed_ms. BaseBasicBolt anchors the emitted tuple to the input and acks the input when
     * execute returns; malformed values are wrapped by {@link Enrich}, never thrown. A record that
     * {@link DeliberateLoss} drops is acked without an emit: lost on purpose.
     */
    static final class EnrichBolt extends BaseBasicBolt {
        private static final long serialVersionUID = 1L;
        static final String KEY = FieldNameBasedTupleToKafkaMapper.BOLT_KEY;
        static final String MESSAGE = FieldNameBasedTupleToKafkaMapper.BOLT_MESSAGE;
        private final DeliberateLoss loss;

        EnrichBolt(DeliberateLoss loss) {
            this.loss = loss;
        }

        @Override
        public void execute(Tuple input, BasicOutputCollector collector) {
            String value = input.getStringByField("value");
            if (loss.drops(value)) {
                return;
            }
            collector.emit(process(input.getStringByField("key"), value));
        }

        static Values process(String key, String value) {
            Enrich.Result out = Enrich.apply(ENGINE, key, value, System.currentTimeMillis());
            return new Values(out.key, out.value);
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields(KEY, MESSAGE));
        }
    }
}
