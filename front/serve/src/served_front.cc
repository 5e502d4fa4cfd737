// ServedFront: the protocol front of an in-process server (served_front.hpp).
#include "symphony/front/served_front.hpp"

namespace symphony::front {

Result<std::unique_ptr<ServedFront>> ServedFront::start(server::Server& server,
                                                        const std::vector<server::ModelOptions>& models,
                                                        Delays delays, const ServedFrontOptions& o) {
  std::unique_ptr<ServedFront> f(new ServedFront());
  f->service_ = std::make_unique<ServerService>(server, models, delays);
  f->service_->set_ready(true);
  FrontOptions fo;
  fo.max_inflight = o.max_inflight;
  f->front_ = std::make_unique<Front>(*f->service_, fo);
  auto l = Listeners::start(*f->front_, o.listen);
  if (!l.ok()) return l.status();
  f->listeners_ = std::move(*l);
  return f;
}

ServedFront::~ServedFront() { stop(); }

void ServedFront::stop() {
  if (front_) front_->begin_stop();
  if (listeners_) listeners_->stop();
}

}  // namespace symphony::front
