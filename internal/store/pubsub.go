package store

import (
	"context"

	"github.com/redis/rueidis"
)

// Publish sends a message on a queue's channel from outside a script:
// SPUBLISH on a cluster, like the scripts (see scripts.Load).
func (s *Store) Publish(ctx context.Context, queue, msg string) error {
	if err := s.enter(ctx, OpPublish, queue); err != nil {
		return err
	}
	return s.rdb.Do(ctx, s.publishCmd(s.keys.Queue(queue).Channel, msg)).Error()
}

func (s *Store) publishCmd(channel, msg string) rueidis.Completed {
	if s.sharded {
		return s.b().Spublish().Channel(channel).Message(msg).Build().Pin()
	}
	return s.b().Publish().Channel(channel).Message(msg).Build().Pin()
}

// Subscribe listens on a queue's channel until ctx ends or the server
// drops the subscription (then it returns nil). subscribed runs on every
// confirmation from the server, message on every message; both run on
// rueidis's reader and must not block.
func (s *Store) Subscribe(ctx context.Context, queue string, subscribed func(), message func(string)) error {
	if err := s.enter(ctx, OpSubscribe, queue); err != nil {
		return err
	}
	channel := s.keys.Queue(queue).Channel
	s.listen(channel, 1)
	defer s.listen(channel, -1)
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
		if (sub.Kind == "subscribe" || sub.Kind == "ssubscribe") && sub.Channel == channel {
			subscribed()
		}
	})
	cmd := s.b().Subscribe().Channel(channel).Build().Pin()
	if s.sharded {
		cmd = s.b().Ssubscribe().Channel(channel).Build().Pin()
	}
	return s.rdb.Receive(hooked, cmd, func(m rueidis.PubSubMessage) { message(m.Message) })
}

// Unsubscribe ends the server side of a queue's subscription: a cancelled
// Subscribe leaves it in place. rueidis retries it until ctx ends. While
// another Subscribe of this store listens on the channel it sends nothing:
// the subscription is the connection's, and an UNSUBSCRIBE would end that
// one too (every worker of a client on the queue would subscribe again,
// and a fleet of workers in one process closing one by one would do so
// quadratically often).
func (s *Store) Unsubscribe(ctx context.Context, queue string) error {
	channel := s.keys.Queue(queue).Channel
	s.listenMu.Lock()
	others := s.listening[channel]
	s.listenMu.Unlock()
	if others > 0 {
		return nil
	}
	cmd := s.b().Unsubscribe().Channel(channel).Build().Pin()
	if s.sharded {
		cmd = s.b().Sunsubscribe().Channel(channel).Build().Pin()
	}
	return s.rdb.Do(ctx, cmd).Error()
}

// listen counts a Subscribe call on channel starting (1) or ending (-1).
func (s *Store) listen(channel string, d int) {
	s.listenMu.Lock()
	defer s.listenMu.Unlock()
	if s.listening == nil {
		s.listening = make(map[string]int)
	}
	if s.listening[channel] += d; s.listening[channel] <= 0 {
		delete(s.listening, channel)
	}
}
