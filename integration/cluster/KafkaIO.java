import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The cluster tier's Kafka producer and consumer, so its test process needs no Spark session.
 *
 *   KafkaIO create BOOTSTRAP TOPIC PARTITIONS
 *   KafkaIO produce BOOTSTRAP TOPIC   < one record value per line (into partition 0, in order)
 *   KafkaIO consume BOOTSTRAP TOPIC   > "PARTITION OFFSET VALUE" per record of every partition,
 *                                        from the beginning up to the end offsets at the start
 */
public final class KafkaIO {
  private KafkaIO() {}

  public static void main(String[] args) throws Exception {
    String bootstrap = args[1];
    String topic = args[2];
    if (args[0].equals("create")) {
      Properties p = new Properties();
      p.put("bootstrap.servers", bootstrap);
      try (Admin admin = Admin.create(p)) {
        admin.createTopics(Collections.singletonList(
            new NewTopic(topic, Integer.parseInt(args[3]), (short) 1))).all().get();
      }
      return;
    }
    if (args[0].equals("produce")) {
      Properties p = new Properties();
      p.put("bootstrap.servers", bootstrap);
      p.put("acks", "all");
      p.put("enable.idempotence", "true");
      try (KafkaProducer<String, String> producer =
               new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) producer.send(new ProducerRecord<>(topic, 0, null, line));
        producer.flush();
      }
      return;
    }
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("enable.auto.commit", "false");
    try (KafkaConsumer<String, String> consumer =
             new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
      List<TopicPartition> parts = new ArrayList<>();
      for (PartitionInfo info : consumer.partitionsFor(topic)) parts.add(new TopicPartition(topic, info.partition()));
      consumer.assign(parts);
      consumer.seekToBeginning(parts);
      Map<TopicPartition, Long> end = consumer.endOffsets(parts);
      StringBuilder out = new StringBuilder();
      while (parts.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
          if (r.offset() < end.get(new TopicPartition(r.topic(), r.partition()))) {
            out.append(r.partition()).append(' ').append(r.offset()).append(' ').append(r.value()).append('\n');
          }
        }
      }
      System.out.print(out);
    }
  }
}
