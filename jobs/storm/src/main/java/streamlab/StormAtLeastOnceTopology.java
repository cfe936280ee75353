package streamlab;

import java.util.List;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.storm.Config;
import org.apache.storm.StormSubmitter;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.kafka.bolt.KafkaBolt;
import org.apache.storm.kafka.bolt.mapper.FieldNameBasedTupleToKafkaMapper;
import org.apache.storm.kafka.bolt.selector.DefaultTopicSelector;
import org.apache.storm.kafka.spout.FirstPollOffsetStrategy;
import org.apache.storm.kafka.spout.KafkaSpout;
import org.apache.storm.kafka.spout.KafkaSpoutConfig;
import org.apache.storm.kafka.spout.RecordTranslator;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

/**
 * Reads JSON records from a Kafka topic, adds {@code engine="storm"} and {@code processed_ms}, and writes them
 * to a result topic with at-least-once delivery: the KafkaSpout (AT_LEAST_ONCE) commits an offset only after
 * its tuple tree is acked; the enrich bolt anchors its output to the input tuple; the KafkaBolt acks only when
 * the producer (acks=all) confirmed the write and fails the tuple otherwise; failed or timed-out tuples
 * (topology.message.timeout.secs) are replayed by the spout.
 *
 * <p>Options: --bootstrap --input-topic --output-topic --group-id [--name streamlab-storm-&lt;input-topic&gt;]
 * [--workers 2] [--spout-parallelism W] [--bolt-parallelism W] [--message-timeout-s 30]
 * [--max-spout-pending 1000] [--ackers W] [--offset-commit-period-ms 30000]
 *
 * <p>Submitted like {@code storm jar} does: {@code java -cp <jar>:<storm>/lib-worker/* -Dstorm.jar=<jar>
 * -Dstorm.options=nimbus.seeds=["host"],nimbus.thrift.port=6627 streamlab.StormAtLeastOnceTopology ...}.
 */
public final class StormAtLeastOnceTopology {
    static final String ENGINE = "storm";
    static final String SPOUT_ID = "kafka-spout";
    static final String ENRICH_ID = "enrich";
    static final String SINK_ID = "kafka-bolt";

    private static final Set<String> OPTIONS = Set.of(
            "bootstrap", "input-topic", "output-topic", "group-id", "name", "workers", "spout-parallelism",
            "bolt-parallelism", "message-timeout-s", "max-spout-pending", "ackers", "offset-commit-period-ms");

    private StormAtLeastOnceTopology() {}

    /** Parsed topology options. */
    record Options(String bootstrap, String inputTopic, String outputTopic, String groupId, String name,
                   int workers, int spoutParallelism, int boltParallelism, int messageTimeoutS,
                   int maxSpoutPending, int ackers, long offsetCommitPeriodMs) {

        static Options parse(String[] argv) {
            Args args = new Args(argv, OPTIONS);
            String inputTopic = args.required("input-topic");
            int workers = args.getInt("workers", 2);
            Options o = new Options(
                    args.required("bootstrap"),
                    inputTopic,
                    args.required("output-topic"),
                    args.required("group-id"),
                    args.get("name", "streamlab-storm-" + inputTopic),
                    workers,
                    args.getInt("spout-parallelism", workers),
                    args.getInt("bolt-parallelism", workers),
                    args.getInt("message-timeout-s", 30),
                    args.getInt("max-spout-pending", 1000),
                    args.getInt("ackers", workers),
                    args.getLong("offset-commit-period-ms", KafkaSpoutConfig.DEFAULT_OFFSET_COMMIT_PERIOD_MS));
            if (o.workers < 1 || o.spoutParallelism < 1 || o.boltParallelism < 1 || o.messageTimeoutS < 1
                    || o.maxSpoutPending < 1 || o.offsetCommitPeriodMs < 1) {
                throw new IllegalArgumentException("counts, timeouts and periods must be >= 1");
            }
            if (o.ackers < 1) {
                // Without ackers Storm acks every tuple on emit: no at-least-once.
                throw new IllegalArgumentException("--ackers must be >= 1 for at-least-once");
            }
            return o;
        }
    }

    public static void main(String[] argv) throws Exception {
        Options options = Options.parse(argv);
        StormSubmitter.submitTopologyWithProgressBar(options.name(), config(options), topology(options));
    }

    /** Topology configuration; worker heap (worker.heap.memory.mb, topology.worker.max.heap.size.mb) stays the cluster's. */
    static Config config(Options options) {
        Config conf = new Config();
        conf.setNumWorkers(options.workers());
        conf.setMessageTimeoutSecs(options.messageTimeoutS());
        conf.setMaxSpoutPending(options.maxSpoutPending());
        conf.setNumAckers(options.ackers());
        return conf;
    }

    static KafkaSpoutConfig<String, String> spoutConfig(Options options) {
        return KafkaSpoutConfig.builder(options.bootstrap(), options.inputTopic())
                .setGroupId(options.groupId())
                .setProcessingGuarantee(KafkaSpoutConfig.ProcessingGuarantee.AT_LEAST_ONCE)
                // Resume from the group's committed offset; from the earliest offset if it has none.
                .setFirstPollOffsetStrategy(FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST)
                .setOffsetCommitPeriodMs(options.offsetCommitPeriodMs())
                .setRecordTranslator(new KeyValueTranslator())
                .build();
    }

    static Properties producerProperties(Options options) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrap());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return props;
    }

    static StormTopology topology(Options options) {
        KafkaBolt<String, String> sink = new KafkaBolt<String, String>()
                .withProducerProperties(producerProperties(options))
                .withTopicSelector(new DefaultTopicSelector(options.outputTopic()))
                .withTupleToKafkaMapper(new FieldNameBasedTupleToKafkaMapper<>(
                        EnrichBolt.KEY, EnrichBolt.MESSAGE));

        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout(SPOUT_ID, new KafkaSpout<>(spoutConfig(options)), options.spoutParallelism());
        builder.setBolt(ENRICH_ID, new EnrichBolt(), options.boltParallelism())
                .shuffleGrouping(SPOUT_ID);
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
     * execute returns; malformed values are wrapped by {@link Enrich}, never thrown.
     */
    static final class EnrichBolt extends BaseBasicBolt {
        private static final long serialVersionUID = 1L;
        static final String KEY = FieldNameBasedTupleToKafkaMapper.BOLT_KEY;
        static final String MESSAGE = FieldNameBasedTupleToKafkaMapper.BOLT_MESSAGE;

        @Override
        public void execute(Tuple input, BasicOutputCollector collector) {
            collector.emit(process(input.getStringByField("key"), input.getStringByField("value")));
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
