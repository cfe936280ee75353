package streamlab.smoke;

import java.util.HashMap;
import java.util.Map;
import org.apache.storm.Config;
import org.apache.storm.StormSubmitter;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

/**
 * Submits a tiny acked topology: each spout task emits the numbers 1..count with a message id
 * (so Storm tracks and acks every tuple tree), and a bolt grouped by number % 16 sums them. It
 * stays alive until killed. Arguments: topology name, workers, numbers per spout task.
 * Submit it the way `storm jar` does (see jobs/README.md).
 */
public final class SmokeTopology {
    private SmokeTopology() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            throw new IllegalArgumentException("usage: SmokeTopology <name> <workers> <count>");
        }
        String name = args[0];
        int workers = Integer.parseInt(args[1]);
        long count = Long.parseLong(args[2]);
        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout("numbers", new NumberSpout(count), workers);
        builder.setBolt("sum", new SumBolt(), workers).fieldsGrouping("numbers", new Fields("key"));
        Config config = new Config();
        config.setNumWorkers(workers);
        config.setNumAckers(workers);
        config.setMaxSpoutPending(200);
        // Count every tuple in the statistics (Storm samples 5 % by default), so acked is exact.
        config.put(Config.TOPOLOGY_STATS_SAMPLE_RATE, 1.0);
        StormSubmitter.submitTopology(name, config, builder.createTopology());
    }

    /** Emits 1..count once, each tuple anchored to its number; replays what fails. */
    static final class NumberSpout extends BaseRichSpout {
        private final long count;
        private transient SpoutOutputCollector collector;
        private transient long next;

        NumberSpout(long count) {
            this.count = count;
        }

        @Override
        public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector out) {
            collector = out;
            next = 1;
        }

        @Override
        public void nextTuple() {
            if (next <= count) {
                collector.emit(new Values(next % 16, next), next);
                next++;
            }
        }

        @Override
        public void fail(Object msgId) {
            long number = (Long) msgId;
            collector.emit(new Values(number % 16, number), number);
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields("key", "number"));
        }
    }

    /** Keeps a running sum per key; BaseBasicBolt acks each input when execute returns. */
    static final class SumBolt extends BaseBasicBolt {
        private final Map<Long, Long> sums = new HashMap<>();

        @Override
        public void execute(Tuple input, BasicOutputCollector collector) {
            sums.merge(input.getLong(0), input.getLong(1), Long::sum);
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {}
    }
}
